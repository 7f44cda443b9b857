/* Allocation wrappers that abort on failure, and die().
 * SPDX-License-Identifier: MIT */
#include "xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *check(void *p)
{
    if (!p) {
        fputs("volley: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *xmalloc(size_t size) { return check(malloc(size ? size : 1)); }

void *xcalloc(size_t nmemb, size_t size)
{
    return check(calloc(nmemb ? nmemb : 1, size ? size : 1));
}

void *xrealloc(void *ptr, size_t size) { return check(realloc(ptr, size ? size : 1)); }

char *xstrdup(const char *s) { return check(strdup(s)); }

char *xstrndup(const char *s, size_t n) { return check(strndup(s, n)); }

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        check(NULL);
    return s;
}

void die(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("volley: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}
