/* Allocation wrappers that abort on failure, and die().
 * SPDX-License-Identifier: MIT */
#include "xalloc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

bool xfail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

/* die() may be called on any thread. exit() would run the atexit handlers,
 * OpenSSL's clean-up among them, while other threads may still be inside
 * OpenSSL (a crash, not an exit status); so the streams are flushed here and
 * the process ends with _exit(). A second thread dying meanwhile waits on the
 * lock until the process is gone, so one message is printed. */
static void say(const char *fmt, va_list ap)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock); /* for good: the process ends */
    fflush(stdout);
    fputs("volley: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(NULL);
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    _exit(1);
}

void die_status(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    _exit(status);
}
