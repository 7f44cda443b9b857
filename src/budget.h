/* -n: the requests of the whole run, shared by every worker. A batch claims
 * its requests from unsent before it goes out; each request is resolved by
 * its response or its error, and when none is left unresolved the run is
 * over. Requests that went out but were not processed (behind a response
 * that closed the connection, or on a thread that stopped) go back to
 * unsent, to be sent again.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_BUDGET_H
#define VOLLEY_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct budget {
    _Atomic uint64_t unsent;
    _Atomic uint64_t unresolved;
    void (*spent)(void *arg); /* called (on a worker thread) at the end */
    void *arg;
};

/* n requests in all; spent(arg) is called on the thread that resolves the
 * last of them. */
void budget_init(struct budget *b, uint64_t n, void (*spent)(void *arg), void *arg);
/* Whether every request has its outcome (b may be one that was never
 * initialised: zeroed, for a run without -n, it is not done). */
bool budget_done(struct budget *b);
/* Requests a batch of up to want may send: want, fewer at the end, or 0. */
size_t budget_claim(struct budget *b, size_t want);
/* Whether any request is left to claim (a hint: another thread may take it). */
bool budget_left(struct budget *b);
/* n claimed requests go back, to be sent again. */
void budget_return(struct budget *b, size_t n);
/* n requests have their outcome (a response or an error). */
void budget_resolve(struct budget *b, size_t n);

#endif
