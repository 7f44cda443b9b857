/* Allocation that cannot fail (it aborts with a message instead) and the one
 * fatal-error helper, so call sites need no NULL checks.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_XALLOC_H
#define VOLLEY_XALLOC_H

#include <stdbool.h>
#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *ptr, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a new string */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* printf into err (errlen bytes), and false: for a check that says why it
 * failed to its caller, which decides how to report it. */
bool xfail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Print "volley: <message>" on stderr and end the process with status 1,
 * from any thread (without running atexit handlers). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The same with the exit status given: a script's os.exit(status) before the
 * run or in done(). */
void die_status(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

#endif
