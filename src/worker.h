/* A worker thread: its own libev loop, connections, receive buffer, request
 * and statistics. Nothing in it is touched by other threads while it runs,
 * except through ev_async (stop) and the counters main reads for progress.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_WORKER_H
#define VOLLEY_WORKER_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "http.h"
#include "net.h"
#include "request.h"
#include "schedule.h"
#include "stats.h"

struct config;
struct conn;
struct script;
struct transport;

/* -n: the requests of the whole run, shared by every worker. A batch claims
 * its requests from unsent before it goes out; each request is resolved by
 * its response or its error, and when none is left unresolved the run is
 * over. */
struct budget {
    _Atomic uint64_t unsent;
    _Atomic uint64_t unresolved;
    void (*spent)(void *arg); /* called (on a worker thread) at the end */
    void *arg;
};

/* Requests a batch of up to want may send: want, fewer at the end, or 0. */
size_t budget_claim(struct budget *b, size_t want);
/* Requests that went out and will not be answered on this connection, but
 * are not errors either (the server closed first): sent again later. */
void budget_return(struct budget *b, size_t n);
void budget_resolve(struct budget *b, size_t n);

struct worker {
    size_t index;
    const struct config *cfg;
    const struct transport *transport;
    struct net_addr addr; /* every connection of this worker goes here */
    struct ev_loop *loop;
    pthread_t thread;
    struct conn *conns;
    size_t nconns;
    char *buf; /* one receive buffer shared by all connections */
    size_t buf_len;
    struct http_head_cache head_cache; /* the last response head its parsers saw */
    struct request request;            /* the static request batch */
    struct script *script;             /* the thread's Lua state, or NULL */
    struct {
        bool request, response, head, body;
    } hooks;         /* what the script defined at the last call (response: head, body wanted) */
    size_t pipeline; /* responses per request() batch, from verification */
    struct budget *budget; /* -n, or NULL */
    /* -R: connection i of this worker sends its batch k at
     * rate_start + (first_conn + i + k * connections) * batch_interval_us. */
    struct schedule schedule;
    uint64_t rate_start;
    double batch_interval_us;
    size_t first_conn;
    struct stats stats;
    ev_async stop_watcher;
    ev_timer sample_timer; /* Req/Sec, every 100 ms as in wrk */
    uint64_t sample_at, sample_requests;
    /* Copies of stats.requests and of the error count (socket errors and
     * status >= 400), published at every sample tick for main's progress
     * line: the hot path keeps plain counters, and a display needs no
     * ordering, so relaxed stores and loads suffice. */
    _Atomic uint64_t live_requests, live_errors;
    struct cpu_busy load; /* how busy the thread was while it ran */
    bool running;         /* its thread has started (set and read on that thread) */
    bool stopping;
    bool finished;  /* ended on its own (thread:stop, or no connection sends any more) */
    char *failure;  /* a fatal error on its thread (a script error), or NULL */
    size_t retired; /* connections that stopped sending: request() returned nil */
    /* Called on the worker thread when it ends on its own or fails. */
    void (*on_finish)(struct worker *w, void *arg);
    void *on_finish_arg;
};

struct worker *worker_new(size_t index, const struct config *cfg, size_t nconns,
                          const struct net_addr *addr);
/* Takes ownership of request: the worker's static batch. */
void worker_set_request(struct worker *w, struct request *request);
/* Start the thread: it connects and runs until stopped. */
void worker_start(struct worker *w);
/* From another thread: end the run. */
void worker_stop(struct worker *w);
void worker_join(struct worker *w);
void worker_free(struct worker *w);

/* After init() in the worker's Lua state: note which hooks it defines, and
 * how many responses each request() batch calls for. */
void worker_set_hooks(struct worker *w, size_t pipeline);

/* thread:stop(): end this worker's run early, whether it is running (from
 * its own thread) or not started yet (from setup()). */
void worker_finish(struct worker *w);
/* On the worker's thread: a fatal error (message) ends its run. It does not
 * exit: main stops and joins the other workers, then reports the error, so
 * that no thread is inside OpenSSL when the process exits. */
void worker_fail(struct worker *w, const char *message);

/* What connections ask the script, so that the connection machine asks one
 * function for each. The batch to send next: the static request, or what
 * request() returned into own (own->depth is set); NULL when there is none:
 * the worker is stopping, or request() returned nil, and then the
 * connection sends no more (as in wrk) and should be closed. Under -n, the
 * depth requests claimed for it go back to the budget. */
const struct request *worker_request(struct worker *w, struct request *own, size_t depth);
/* After a response: response() if the script defines it, and what the
 * parser must keep of the next response for it. false: the worker is
 * stopping. */
bool worker_response(struct worker *w, struct http_parser *p);
/* Before a batch: whether the script defines delay(), and its pause in *ms.
 * Check stopping after a true return. */
bool worker_delay(struct worker *w, double *ms);

/* Requests per batch: what request() returns, or the static request. */
static inline size_t worker_depth(const struct worker *w)
{
    return w->hooks.request ? w->pipeline : w->request.depth;
}

/* Connections per worker: c / t each, the first c % t workers one more. */
size_t worker_share(uint64_t connections, uint64_t threads, size_t index);

/* -R: start the constant-rate schedule at start (clock_us), before
 * worker_start. Every worker gets the same start. */
void worker_set_rate(struct worker *w, uint64_t start);

#endif
