/* A worker thread: its own libev loop, connections, receive buffer, request
 * and statistics. Nothing in it is touched by other threads while it runs,
 * except through ev_async (start, stop) and the counters main reads for
 * progress.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_WORKER_H
#define VOLLEY_WORKER_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "budget.h"
#include "conn.h"
#include "cpu.h"
#include "http.h"
#include "net.h"
#include "request.h"
#include "stats.h"

struct config;
struct intervals;
struct script;

struct worker {
    size_t index;
    const struct config *cfg;
    struct net_addr addr; /* every connection of this worker goes here */
    struct ev_loop *loop;
    pthread_t thread;
    struct conn_config conn; /* what its connections see of it */
    struct conn_live live;   /* and what changes while the run is on */
    struct conn *conns;
    size_t nconns;
    char *buf;                         /* one receive buffer shared by all connections */
    struct http_head_cache head_cache; /* the last response head its parsers saw */
    struct request request;            /* the static request batch */
    struct script *script;             /* the thread's Lua state, or NULL */
    size_t pipeline;                   /* responses per request() batch, from verification */
    struct pace pace;                  /* -R */
    /* What the connections record into: the current interval. At each
     * interval boundary it is handed to main (intervals), added to total
     * and emptied; at the end of the run total holds everything. */
    struct stats stats;
    struct stats total;
    /* --warmup: what was recorded before run_start, left out of total and
     * of the intervals; warming until then. */
    struct stats warmup;
    bool warming;
    struct intervals *intervals;
    ev_timer interval_timer;
    /* clock_us of the start of what is measured (after any warm-up), and
     * of the next interval boundary */
    uint64_t run_start, next_cut;
    uint64_t first_conn; /* global index of its first connection, over every shard */
    ev_async stop_watcher;
    ev_async start_watcher; /* the run starts at start_at */
    _Atomic uint64_t start_at;
    ev_timer sample_timer; /* Req/Sec, every 100 ms as in wrk */
    uint64_t sample_at, sample_requests;
    /* Copies of the request count and of the error count (socket errors and
     * status >= 400), published at every sample tick for main's progress
     * line: the hot path keeps plain counters, and a display needs no
     * ordering, so relaxed stores and loads suffice. */
    _Atomic uint64_t live_requests, live_errors;
    /* Its connections open now, published likewise for the live metrics. */
    _Atomic uint64_t live_open;
    struct cpu_busy load; /* how busy the thread was while it ran */
    bool running;         /* its thread has started (set and read on that thread) */
    bool finished;        /* ended on its own (thread:stop, or no connection sends any more) */
    char *failure;        /* a fatal error on its thread (a script error), or NULL */
    size_t retired;       /* connections that stopped sending: request() returned nil */
    /* Called on the worker thread when it ends on its own or fails. */
    void (*on_finish)(struct worker *w, void *arg);
    void *on_finish_arg;
    /* Called on the worker thread once each of its connections has been
     * opened or has failed to open for the first time. */
    void (*on_settled)(void *arg);
    void *on_settled_arg;
};

struct worker *worker_new(size_t index, const struct config *cfg, size_t nconns,
                          const struct net_addr *addr);
/* Takes ownership of request: the worker's static batch. */
void worker_set_request(struct worker *w, struct request *request);
/* -n: the run's budget, before worker_start. */
void worker_set_budget(struct worker *w, struct budget *budget);
/* Start the thread: it connects and, in the closed model, runs until stopped. */
void worker_start(struct worker *w);
/* From another thread: the run starts at start (clock_us), and so do its
 * intervals; with -R the first requests are due then. */
void worker_go(struct worker *w, uint64_t start);
/* Before worker_start: where the worker hands each interval of
 * cfg->interval_us. */
void worker_set_intervals(struct worker *w, struct intervals *iv);
/* From another thread: end the run. */
void worker_stop(struct worker *w);
void worker_join(struct worker *w);
void worker_free(struct worker *w);

/* After init() in the worker's Lua state: how many responses each
 * request() batch calls for, and the hooks its connections call. The
 * script's globals are looked up on every call, so a hook it defines,
 * replaces or removes during the run counts from then on. */
void worker_set_hooks(struct worker *w, size_t pipeline);

/* thread:stop(): end this worker's run early, whether it is running (from
 * its own thread) or not started yet (from setup()). Requests it had in
 * flight go back to -n's budget. */
void worker_finish(struct worker *w);
/* On the worker's thread: a fatal error (message) ends its run. It does not
 * exit: main stops and joins the other workers, then reports the error, so
 * that no thread is inside OpenSSL when the process exits. */
void worker_fail(struct worker *w, const char *message);

/* Requests per batch: what request() returns, or the static request. */
static inline size_t worker_depth(const struct worker *w) { return w->conn.session.depth; }

/* Connections per worker: c / t each, the first c % t workers one more. */
size_t worker_share(uint64_t connections, uint64_t threads, size_t index);

/* -R: set up the constant-rate schedule, before worker_start. */
void worker_set_rate(struct worker *w);

#endif
