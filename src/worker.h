/* A worker thread: its own libev loop, connections, receive buffer, request
 * and statistics. Nothing in it is touched by other threads while it runs,
 * except through ev_async (start, stop) and the counters main reads for
 * progress.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_WORKER_H
#define VOLLEY_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "stats.h"

struct budget;
struct config;
struct intervals;
struct profile;
struct request;
struct route;
struct sources_count;
struct script;

/* A worker, opaque: main sees it through the functions below. */
struct worker;

/* How a worker's run ended before main stopped it. */
enum worker_end {
    WORKER_FINISHED, /* on its own: thread:stop(), or no connection sends any more */
    WORKER_FAILED,   /* a script error */
    WORKER_EXITED,   /* the script called os.exit() */
};

/* What a worker tells main, on the worker's thread. */
struct worker_events {
    /* It ended on its own (thread:stop(), or no connection sends any
     * more), failed (a script error) or exited (the script called
     * os.exit()): worker_result says which. */
    void (*finished)(void *arg, enum worker_end how);
    /* Each of its connections has been opened, or has failed to open, for
     * the first time (with -R the run starts after that). */
    void (*settled)(void *arg);
    void *arg;
};

/* What a worker measured and how it went, once joined. */
struct worker_result {
    const struct stats *total;  /* the run, after any warm-up */
    const struct stats *warmup; /* --warmup's (empty without) */
    struct cpu_busy load;       /* how busy its thread was while it ran */
    /* clock_us when its run ended: before it closed its connections, which
     * takes seconds for tens of thousands of them and is no part of the run */
    uint64_t ended_at;
    size_t retired;      /* connections that stopped: request() returned nil */
    const char *failure; /* a fatal error on its thread (a script error), or NULL */
    /* --bind: what its connections did from each source address, after
     * any warm-up; NULL without */
    const struct sources_count *by_source;
    /* The script called os.exit(exit_status) on its thread: what volley
     * says of it, or NULL. */
    const char *exit_message;
    int exit_status;
    const struct profile *profile; /* -R: its schedule (the whole run's), else NULL */
};

struct worker *worker_new(size_t index, const struct config *cfg, size_t nconns,
                          const struct route *route, const struct worker_events *events);
/* Takes ownership of request: the worker's static batch. */
void worker_set_request(struct worker *w, struct request *request);
/* With a script: the worker's own Lua state, in wrk's order: the script's
 * top level runs in it, setup(thread) runs in the main state, then
 * init(args) in the new one; the first worker's request() is verified,
 * which fixes *pipeline, the depth of every request() batch; then the
 * static request and the hooks. */
void worker_script(struct worker *w, struct script *main_script, size_t *pipeline);
/* -n: the run's budget, before worker_start. */
void worker_set_budget(struct worker *w, struct budget *budget);
/* Start the thread: it connects and, in the closed model, runs until stopped. */
void worker_start(struct worker *w);
/* From another thread: the run starts at start (clock_us), and so do its
 * intervals; with -R the first requests are due then, and connections held
 * for --start-at send from then, unless not sends (the run was over before
 * it started). */
void worker_go(struct worker *w, uint64_t start, bool sends);
/* Before worker_start: where the worker hands each interval of
 * cfg->interval_us. */
void worker_set_intervals(struct worker *w, struct intervals *iv);
/* --start-at in the closed model: open the connections when the thread
 * starts, but send nothing until worker_go(). */
void worker_hold(struct worker *w);
/* From another thread: end the run. */
void worker_stop(struct worker *w);
void worker_join(struct worker *w);
void worker_free(struct worker *w);

/* After worker_join. */
void worker_result(const struct worker *w, struct worker_result *out);
/* From another thread, at any time: the responses and the errors (socket
 * errors and status >= 400) it counted so far, as of its last sample tick
 * (every 100 ms), for the progress line. */
void worker_live(struct worker *w, uint64_t *requests, uint64_t *errors);
/* From another thread, at any time: its connections open now, as of its
 * last sample tick (0 once the run is over), for the live metrics. */
uint64_t worker_open(struct worker *w);

/* Requests per batch: what request() returns, or the static request (the
 * most of any protocol's: HTTP/1.1 pipelines it -m deep). */
size_t worker_depth(const struct worker *w);

/* Connections per worker: c / t each, the first c % t workers one more. */
size_t worker_share(uint64_t connections, uint64_t threads, size_t index);

/* -R: set up the constant-rate schedule, before worker_start. */
void worker_set_rate(struct worker *w);

#endif
