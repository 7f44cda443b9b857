/* Worker threads: each runs its own libev loop over its own connections and
 * statistics, so nothing mutable is shared during the run; main stops them
 * with ev_async and merges their statistics after joining them.
 * SPDX-License-Identifier: MIT */
#include "worker.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "cli.h"
#include "clock.h"
#include "conn.h"
#include "script.h"
#include "tls.h"
#include "transport.h"
#include "xalloc.h"

/* Big enough that large bodies take few read() calls; shared by the
 * worker's connections, since a read is consumed before the next one. */
#define WORKER_BUF (64 * 1024)
#define SAMPLE_INTERVAL 0.1

size_t worker_share(uint64_t connections, uint64_t threads, size_t index)
{
    return (size_t)(connections / threads + (index < connections % threads ? 1 : 0));
}

size_t budget_claim(struct budget *b, size_t want)
{
    uint64_t left = atomic_load_explicit(&b->unsent, memory_order_relaxed), take;
    do {
        take = left < want ? left : want;
        if (take == 0)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&b->unsent, &left, left - take,
                                                    memory_order_relaxed, memory_order_relaxed));
    return (size_t)take;
}

void budget_return(struct budget *b, size_t n)
{
    atomic_fetch_add_explicit(&b->unsent, n, memory_order_relaxed);
}

void budget_resolve(struct budget *b, size_t n)
{
    if (n && atomic_fetch_sub_explicit(&b->unresolved, n, memory_order_acq_rel) == n)
        b->spent(b->arg);
}

/* Req/Sec as wrk samples it: per thread, every 100 ms, only when something
 * completed since the last sample (an idle interval simply grows). */
static void on_sample(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct worker *w = t->data;
    const struct errors *e = &w->stats.errors;
    uint64_t now = clock_us(), n = w->stats.requests - w->sample_requests;
    atomic_store_explicit(&w->live_requests, w->stats.requests, memory_order_relaxed);
    atomic_store_explicit(&w->live_errors, e->connect + e->read + e->write + e->timeout + e->status,
                          memory_order_relaxed);
    if (n == 0 || now <= w->sample_at)
        return;
    hist_record(w->stats.rps, (uint64_t)((double)n * 1e6 / (double)(now - w->sample_at)));
    w->sample_at = now;
    w->sample_requests = w->stats.requests;
}

static void on_stop(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)a, (void)revents;
    struct worker *w = a->data;
    w->stopping = true;
    ev_break(loop, EVBREAK_ALL);
}

struct worker *worker_new(size_t index, const struct config *cfg, size_t nconns,
                          const struct net_addr *addr)
{
    struct worker *w = xcalloc(1, sizeof *w);
    w->index = index;
    w->cfg = cfg;
    w->transport = cfg->url.tls ? &transport_tls : &transport_plain;
    w->addr = *addr;
    w->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
    if (!w->loop)
        die("unable to create an event loop: %s", strerror(errno));
    w->buf_len = WORKER_BUF;
    w->buf = xmalloc(w->buf_len);
    stats_init(&w->stats);
    w->nconns = nconns;
    w->conns = xcalloc(nconns, sizeof *w->conns);
    for (size_t i = 0; i < nconns; i++)
        conn_init(&w->conns[i], w);
    ev_async_init(&w->stop_watcher, on_stop);
    w->stop_watcher.data = w;
    ev_async_start(w->loop, &w->stop_watcher);
    ev_timer_init(&w->sample_timer, on_sample, SAMPLE_INTERVAL, SAMPLE_INTERVAL);
    w->sample_timer.data = w;
    ev_timer_start(w->loop, &w->sample_timer);
    return w;
}

void worker_set_request(struct worker *w, struct request *request)
{
    request_free(&w->request);
    w->request = *request;
    memset(request, 0, sizeof *request);
}

void worker_set_rate(struct worker *w, uint64_t start)
{
    const struct config *cfg = w->cfg;
    size_t depth = worker_depth(w);
    w->rate_start = start;
    w->batch_interval_us = (double)depth * 1e6 / (double)cfg->rate;
    w->first_conn = 0;
    for (size_t i = 0; i < w->index; i++)
        w->first_conn += worker_share(cfg->connections, cfg->threads, i);
    schedule_init(&w->schedule, w->loop, w->nconns, conn_due);
}

void worker_set_hooks(struct worker *w, size_t pipeline)
{
    w->pipeline = pipeline;
    w->hooks.request = script_has_request(w->script);
    w->hooks.response = script_response_wants(w->script, &w->hooks.head, &w->hooks.body);
}

const struct request *worker_request(struct worker *w, struct request *own, size_t depth)
{
    if (!w->script)
        return &w->request;
    own->depth = w->pipeline;
    switch (script_request(w->script, own)) {
    case SCRIPT_NONE:
        w->hooks.request = false;
        return &w->request;
    case SCRIPT_DONE:
        w->hooks.request = true;
        return own;
    case SCRIPT_NIL:
        /* main says so once, after the run; when no connection of the
         * worker sends any more, the worker is done, as after thread:stop(). */
        if (++w->retired == w->nconns)
            worker_finish(w);
        break;
    case SCRIPT_FAILED:
        break;
    }
    if (w->budget)
        budget_return(w->budget, depth);
    return NULL;
}

bool worker_response(struct worker *w, struct http_parser *p)
{
    if (!w->script)
        return true;
    script_response(w->script, p);
    w->hooks.response = script_response_wants(w->script, &w->hooks.head, &w->hooks.body);
    p->want_head = w->hooks.head;
    p->want_body = w->hooks.body;
    return !w->stopping;
}

bool worker_delay(struct worker *w, double *ms)
{
    return w->script && script_delay(w->script, ms) != SCRIPT_NONE;
}

/* A run shorter than one sample interval (a quick -n) would have no Req/Sec
 * sample at all; its one sample is then the whole run's rate. */
static void last_sample(struct worker *w)
{
    uint64_t now = clock_us();
    if (hist_count(w->stats.rps) == 0 && w->stats.requests && now > w->sample_at)
        hist_record(w->stats.rps,
                    (uint64_t)((double)w->stats.requests * 1e6 / (double)(now - w->sample_at)));
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct cpu_thread start, end;
    cpu_thread_now(&start);
    w->running = true;
    w->sample_at = clock_us();
    /* The kernel may delay a timer by the thread's slack (50 us by default):
     * on a schedule, send on the microsecond. */
    if (w->cfg->rate)
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    for (size_t i = 0; i < w->nconns && !w->stopping; i++)
        conn_start(&w->conns[i]);
    if (!w->stopping)
        ev_run(w->loop, 0);
    cpu_thread_now(&end);
    cpu_thread_since(&start, &end, &w->load);
    last_sample(w);
    for (size_t i = 0; i < w->nconns; i++)
        conn_stop(&w->conns[i]);
    if ((w->finished || w->failure) && w->on_finish)
        w->on_finish(w, w->on_finish_arg);
    return NULL;
}

void worker_start(struct worker *w)
{
    /* Signals are main's business: workers block them all. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, run, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        die("unable to create thread %zu: %s", w->index, strerror(rc));
}

void worker_stop(struct worker *w) { ev_async_send(w->loop, &w->stop_watcher); }

void worker_join(struct worker *w) { pthread_join(w->thread, NULL); }

void worker_finish(struct worker *w)
{
    w->finished = w->stopping = true;
    ev_break(w->loop, EVBREAK_ALL);
}

void worker_fail(struct worker *w, const char *message)
{
    if (!w->failure)
        w->failure = xstrdup(message);
    w->stopping = true;
    ev_break(w->loop, EVBREAK_ALL);
}

void worker_free(struct worker *w)
{
    for (size_t i = 0; i < w->nconns; i++)
        conn_free(&w->conns[i]);
    free(w->conns);
    free(w->buf);
    request_free(&w->request);
    schedule_free(&w->schedule);
    script_free(w->script);
    free(w->failure);
    stats_free(&w->stats);
    ev_loop_destroy(w->loop);
    free(w);
}
