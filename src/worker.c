/* Worker threads: each runs its own libev loop over its own connections and
 * statistics, so nothing mutable is shared during the run; main stops them
 * with ev_async. At each interval boundary a worker hands what it recorded
 * to main (interval.c) and keeps the running total, which main merges after
 * joining it.
 * SPDX-License-Identifier: MIT */
#include "worker.h"

#include <errno.h>
#include <ev.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "budget.h"
#include "cli.h"
#include "clock.h"
#include "conn.h"
#include "conn_ring.h"
#include "conn_tunnel.h"
#include "http.h"
#include "interval.h"
#include "net.h"
#include "proxy.h"
#include "request.h"
#include "route.h"
#include "script.h"
#include "sources.h"
#include "tls.h"
#include "transport.h"
#include "uring.h"
#include "xalloc.h"

struct worker {
    size_t index;
    const struct config *cfg;
    struct route route; /* every connection of this worker goes this way */
    struct ev_loop *loop;
    struct uring *ring; /* its connections' io_uring, or NULL (epoll) */
    pthread_t thread;
    struct conn_config conn; /* what its connections see of it */
    struct conn_live live;   /* and what changes while the run is on */
    struct conn *conns;
    size_t nconns;
    char *buf;                                /* one receive buffer shared by all connections */
    struct http_head_cache head_cache;        /* the last response head its parsers saw */
    struct request requests[PROTOCOLS_COUNT]; /* the static batch, as each protocol sends it */
    struct script *script;                    /* the thread's Lua state, or NULL */
    struct script_thread view;                /* what that state sees of the thread */
    size_t pipeline;                          /* responses per request() batch, from verification */
    struct pace pace;                         /* -R */
    /* --bind: what its connections did from each source address since the
     * warm-up, and where it looks for ports */
    struct sources_count *by_source;
    struct sources_ports ports;
    struct buf absolute; /* through an HTTP proxy: request()'s batch in absolute-form */
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
    atomic_bool start_sends; /* false: the run was over before it started */
    ev_timer sample_timer;   /* Req/Sec, every 100 ms as in wrk */
    uint64_t sample_at, sample_requests;
    /* Copies of the request count and of the error count (socket errors and
     * status >= 400), published at every sample tick for main's progress
     * line: the hot path keeps plain counters, and a display needs no
     * ordering, so relaxed stores and loads suffice. */
    _Atomic uint64_t live_requests, live_errors;
    /* Its connections open now, published likewise for the live metrics. */
    _Atomic uint64_t live_open;
    struct cpu_busy load; /* how busy the thread was while it ran */
    uint64_t ended_at;    /* clock_us when its loop ended, before the teardown */
    bool running;         /* its thread has started (set and read on that thread) */
    bool finished;        /* ended on its own (thread:stop, or no connection sends any more) */
    char *failure;        /* a fatal error on its thread (a script error), or NULL */
    char *exit_message;   /* the script called os.exit(exit_status) on its thread, or NULL */
    int exit_status;
    size_t retired;              /* connections that stopped sending: request() returned nil */
    struct worker_events events; /* what it tells main */
};

/* Big enough that large bodies take few read() calls; shared by the
 * worker's connections, since a read is consumed before the next one. */
#define WORKER_BUF (64 * 1024)
#define SAMPLE_INTERVAL 0.1

size_t worker_share(uint64_t connections, uint64_t threads, size_t index)
{
    return (size_t)(connections / threads + (index < connections % threads ? 1 : 0));
}

/* Req/Sec as wrk samples it: per thread, every 100 ms, only when something
 * completed since the last sample (an idle interval simply grows). */
static void on_sample(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct worker *w = t->data;
    uint64_t requests = w->total.requests + w->stats.requests;
    uint64_t now = clock_us(), n = requests - w->sample_requests;
    atomic_store_explicit(&w->live_requests, requests, memory_order_relaxed);
    atomic_store_explicit(&w->live_errors, stats_errors(&w->total) + stats_errors(&w->stats),
                          memory_order_relaxed);
    atomic_store_explicit(&w->live_open, w->live.open, memory_order_relaxed);
    if (n == 0 || now <= w->sample_at)
        return;
    hist_record(w->stats.rps, (uint64_t)((double)n * 1e6 / (double)(now - w->sample_at)));
    w->sample_at = now;
    w->sample_requests = requests;
}

/* Hands the interval recorded so far to main and starts the next one. */
static void cut(struct worker *w)
{
    conn_record(&w->conn, &w->live);
    if (w->intervals)
        intervals_deliver(w->intervals, w->index, &w->stats);
    stats_merge(&w->total, &w->stats);
    stats_reset(&w->stats);
}

/* The end of --warmup: what was recorded so far is set apart, and the
 * first interval starts. The Req/Sec sampling starts over with it. */
static void end_warmup(struct worker *w, uint64_t now)
{
    conn_record(&w->conn, &w->live);
    stats_merge(&w->warmup, &w->stats);
    stats_reset(&w->stats);
    if (w->by_source)
        memset(w->by_source, 0, w->route.sources->n * sizeof *w->by_source);
    w->warming = false;
    w->next_cut = w->run_start + w->cfg->spec.interval_us;
    w->sample_at = now;
    w->sample_requests = 0;
}

/* A boundary is due at next_cut, except at or past the run's time limit:
 * there the end of the run cuts the last interval. */
static bool cut_due(const struct worker *w, uint64_t now)
{
    uint64_t limit = w->cfg->spec.time_limit_us;
    return now >= w->next_cut && !(limit && w->next_cut >= w->run_start + limit);
}

static void arm_cut(struct worker *w, uint64_t now)
{
    uint64_t limit = w->cfg->spec.time_limit_us;
    if (limit && w->next_cut >= w->run_start + limit)
        return;
    double after = w->next_cut > now ? (double)(w->next_cut - now) / 1e6 : 0;
    ev_timer_set(&w->interval_timer, after, 0.);
    ev_timer_start(w->loop, &w->interval_timer);
}

/* Boundaries fall at exact multiples of the interval from the run's start.
 * The timer may fire a little early (libev times it from the loop's clock),
 * then it waits out the rest; or late, when the loop was busy: responses
 * completed meanwhile count in the interval that ends, and boundaries passed
 * while a script hook held the loop give this worker empty intervals. */
static void on_interval(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct worker *w = t->data;
    ev_now_update(loop);
    uint64_t now = clock_us();
    if (w->warming && now >= w->run_start)
        end_warmup(w, now);
    while (!w->warming && cut_due(w, now)) {
        cut(w);
        w->next_cut += w->cfg->spec.interval_us;
    }
    arm_cut(w, now);
}

static void on_stop(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)a, (void)revents;
    struct worker *w = a->data;
    w->live.stopping = true;
    ev_break(loop, EVBREAK_ALL);
}

/* --ramp-up: the connection in place g of the run's C (spec_turns: the
 * shards and their threads open theirs in turn) opens at start + g T / C;
 * its timer waits for the moment as it waits out a back-off. */
static void ramp_up(struct worker *w, uint64_t start)
{
    const struct config *cfg = w->cfg;
    uint64_t first, stride;
    spec_turns(&cfg->spec, w->index, &first, &stride);
    for (size_t i = 0; i < w->nconns && !w->live.stopping; i++) {
        double g = (double)first + (double)i * (double)stride;
        struct conn *c = &w->conns[i];
        c->retry_at =
            start + (uint64_t)(g * (double)cfg->spec.ramp_up_us / (double)cfg->spec.connections);
        conn_kick(c);
    }
}

/* The run starts: the warm-up if there is one, then its first interval,
 * and with -R its schedule, which runs through the warm-up. What was
 * recorded before (connections opened) counts in the first of them. */
static void on_start(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)revents;
    struct worker *w = a->data;
    uint64_t start = atomic_load_explicit(&w->start_at, memory_order_acquire);
    w->run_start = start + w->cfg->spec.warmup_us;
    w->warming = w->cfg->spec.warmup_us > 0;
    w->next_cut = w->warming ? w->run_start : w->run_start + w->cfg->spec.interval_us;
    ev_now_update(loop);
    /* Req/Sec is sampled from the start, not from the connections' opening */
    w->sample_at = clock_us();
    arm_cut(w, w->sample_at);
    if (w->cfg->spec.ramp_up_us)
        ramp_up(w, start);
    /* Connections opened first send from now, unless the run was over
     * before it started (Ctrl-C during a --start-at wait). */
    if ((!w->conn.pace && !w->live.held) ||
        !atomic_load_explicit(&w->start_sends, memory_order_relaxed))
        return;
    w->live.held = false;
    if (w->conn.pace)
        w->pace.start = start;
    for (size_t i = 0; i < w->nconns && !w->live.stopping; i++)
        conn_kick(&w->conns[i]);
}

/* thread:stop(): end this worker's run early, whether it is running (from
 * its own thread) or not started yet (from setup()). Requests it had in
 * flight go back to -n's budget. */
static void finish(void *arg)
{
    struct worker *w = arg;
    w->finished = w->live.stopping = true;
    ev_break(w->loop, EVBREAK_ALL);
}

/* On the worker's thread: a fatal error (message) ends its run. It does not
 * exit: main stops and joins the other workers, then reports the error, so
 * that no thread is inside OpenSSL when the process exits. */
static void fail(void *arg, const char *message)
{
    struct worker *w = arg;
    if (!w->failure)
        w->failure = xstrdup(message);
    w->live.stopping = true;
    ev_break(w->loop, EVBREAK_ALL);
}

/* On the worker's thread: the script called os.exit(status). The worker
 * stops as on a failure, but the run ends in order, with its report; main
 * then prints message and exits with status. */
static void exit_run(void *arg, int status, const char *message)
{
    struct worker *w = arg;
    if (!w->exit_message) {
        w->exit_message = xstrdup(message);
        w->exit_status = status;
    }
    w->live.stopping = true;
    ev_break(w->loop, EVBREAK_ALL);
}

/* The script's hooks, as the connections call them. The script's globals
 * are looked up at every call (as wrk does): a hook defined, replaced or
 * removed by another hook during the run counts from its next use. */
static const struct request *static_request(void *arg, struct request *own, size_t protocol)
{
    (void)own;
    struct worker *w = arg;
    return &w->requests[protocol];
}

static double hook_delay(void *arg)
{
    struct worker *w = arg;
    double ms = 0;
    if (script_delay(w->script, &ms) == SCRIPT_NONE)
        w->live.delay = false; /* removed: no pause from the next batch on */
    return ms;
}

/* Whether -m pipelines the static request over protocol p: over one that
 * is not multiplexed (HTTP/1.1), -m asks for a batch that deep. */
static bool pipelines(const struct worker *w, const struct proto_ops *p)
{
    return !p->multiplexed && w->cfg->spec.streams > 1;
}

/* -m over HTTP/1.1 is the static request's pipeline: a request() batch
 * pipelines by what it holds. */
static void check_pipelining(const struct worker *w)
{
    for (size_t i = 0; i < w->conn.nprotocols; i++)
        if (pipelines(w, w->conn.protocols[i]))
            die("-m/--streams pipelines the static request over HTTP/1.1; a script's request() "
                "pipelines by returning several requests at once");
}

/* Through an HTTP proxy, a request()'s batch as it goes: in absolute-form.
 * The requests and which are HEAD requests stay what they were. */
static void absolute_form(struct worker *w, struct request *own)
{
    proxy_absolute_form(&w->cfg->proxy, own->data, own->len, &w->absolute);
    if (w->absolute.len + 1 > own->cap) {
        own->cap = w->absolute.len + 1;
        own->data = xrealloc(own->data, own->cap);
    }
    memcpy(own->data, w->absolute.data, w->absolute.len + 1);
    own->len = w->absolute.len;
}

/* request() if the script defines it, else the static request; NULL when
 * request() returned nil: as in wrk that connection sends no more (main
 * says how many did, after the run), and when none of the worker's does,
 * it is done, as after thread:stop(). */
static const struct request *hook_request(void *arg, struct request *own, size_t protocol)
{
    struct worker *w = arg;
    const struct request *r = NULL;
    own->depth = w->pipeline;
    switch (script_request(w->script, own)) {
    case SCRIPT_NONE:
        r = &w->requests[protocol];
        break;
    case SCRIPT_DONE:
        check_pipelining(w); /* request() may be defined during the run */
        if (w->cfg->proxy.origin)
            absolute_form(w, own);
        r = own;
        break;
    case SCRIPT_NIL:
        if (++w->retired == w->nconns)
            finish(w);
        break;
    case SCRIPT_FAILED:
        break;
    }
    /* Every batch asks for a request: a delay() a hook defined meanwhile
     * is noticed here, and pauses the batches after this one. */
    if (!w->live.delay && script_has_delay(w->script))
        w->live.delay = true;
    return r;
}

static void hook_response(void *arg, const struct proto_response *r)
{
    struct worker *w = arg;
    script_response(w->script, r);
    script_response_wants(w->script, &w->live.wants.head, &w->live.wants.body);
}

static void settled(void *arg)
{
    struct worker *w = arg;
    if (w->events.settled)
        w->events.settled(w->events.arg);
}

/* TCP, TLS over it, or the transport the run's protocol brings (QUIC's). */
static const struct transport *transport_of(const struct run_spec *spec)
{
    if (spec->protocols[0]->transport)
        return spec->protocols[0]->transport;
    return spec->tls ? &transport_tls : &transport_plain;
}

struct worker *worker_new(size_t index, const struct config *cfg, size_t nconns,
                          const struct route *route, const struct worker_events *events)
{
    struct worker *w = xcalloc(1, sizeof *w);
    w->index = index;
    w->events = *events;
    w->cfg = cfg;
    w->route = *route;
    w->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
    if (!w->loop)
        die("unable to create an event loop: %s", strerror(errno));
    w->buf = xmalloc(WORKER_BUF);
    stats_init(&w->stats);
    stats_init(&w->total);
    if (cfg->spec.warmup_us)
        stats_init(&w->warmup);
    ev_timer_init(&w->interval_timer, on_interval, 0., 0.);
    w->interval_timer.data = w;
    w->live.unsettled = nconns;
    /* Connections are numbered across every shard of the run: this shard's
     * come after the earlier shards', so that their source addresses and
     * ports follow each other (their turns go round, see spec_turns). */
    w->first_conn = cfg->spec.shard.first_conn;
    for (size_t i = 0; i < index; i++)
        w->first_conn += worker_share(cfg->spec.shard.connections, cfg->spec.threads, i);
    sources_ports_init(&w->ports, route->sources, w->first_conn, nconns, cfg->spec.connections);
    if (route->sources && route->sources->listed)
        w->by_source = xcalloc(route->sources->n, sizeof *w->by_source);
    w->conn = (struct conn_config){
        .loop = w->loop,
        .transport = transport_of(&cfg->spec),
        .route = &w->route,
        .first = w->first_conn,
        .by_source = w->by_source,
        .ports = &w->ports,
        .tunnel = route->tunnel ? conn_tunnel_step : NULL,
        .timeout_us = cfg->spec.timeout_us,
        .stats = &w->stats,
        .rbuf = w->buf,
        .rbuf_len = WORKER_BUF,
        .hooks = {.request = static_request, .settled = settled, .arg = w},
    };
    /* The protocols a connection may speak, each with what its sessions
     * see of the run. */
    for (size_t i = 0; i < cfg->spec.nprotocols; i++) {
        w->conn.protocols[i] = cfg->spec.protocols[i];
        w->conn.sessions[i] = (struct proto_conf){
            .streams = (size_t)cfg->spec.streams,
            .depth = 1,
            .no_keepalive = cfg->spec.no_keepalive,
            .resend_unanswered = cfg->proxy.origin != NULL,
            .tls = cfg->spec.tls,
            .head_cache = &w->head_cache,
            .stats = &w->stats,
            .wants = &w->live.wants,
        };
    }
    w->conn.nprotocols = cfg->spec.nprotocols;
    if (cfg->spec.engine == SPEC_ENGINE_IO_URING && w->conn.transport->ring)
        w->ring = uring_new(w->loop, nconns);
    w->nconns = nconns;
    w->conns = xcalloc(nconns, sizeof *w->conns);
    for (size_t i = 0; i < nconns; i++) {
        conn_init(&w->conns[i], &w->conn, &w->live, i);
        if (w->ring)
            conn_ring_init(&w->conns[i], w->ring, i);
    }
    ev_async_init(&w->stop_watcher, on_stop);
    w->stop_watcher.data = w;
    ev_async_start(w->loop, &w->stop_watcher);
    ev_async_init(&w->start_watcher, on_start);
    w->start_watcher.data = w;
    ev_async_start(w->loop, &w->start_watcher);
    ev_timer_init(&w->sample_timer, on_sample, SAMPLE_INTERVAL, SAMPLE_INTERVAL);
    w->sample_timer.data = w;
    ev_timer_start(w->loop, &w->sample_timer);
    return w;
}

void worker_set_request(struct worker *w, struct request *request)
{
    const struct config *cfg = w->cfg;
    char err[256];
    if (cfg->proxy.origin) { /* through an HTTP proxy */
        proxy_absolute_form(&cfg->proxy, request->data, request->len, &w->absolute);
        char *data = xmalloc(w->absolute.len + 1);
        memcpy(data, w->absolute.data, w->absolute.len + 1);
        if (!request_set(request, data, w->absolute.len, err, sizeof err))
            die("the request cannot be sent through the proxy: %s", err);
    }
    for (size_t i = 0; i < w->conn.nprotocols; i++) {
        const struct proto_ops *p = w->conn.protocols[i];
        struct request *r = &w->requests[i];
        request_free(r);
        *r = request_copy(request);
        /* Checked once here, so that the run never starts with a request
         * it cannot send. */
        if (p->check && !p->check(r, cfg->spec.tls, err, sizeof err))
            die("the request cannot be sent over %s: %s", p->name, err);
        /* -m over HTTP/1.1: the request pipelined that deep. */
        if (pipelines(w, p))
            request_repeat(r, (size_t)cfg->spec.streams);
        if (w->conn.hooks.request == static_request)
            w->conn.sessions[i].depth = r->depth;
    }
    request_free(request);
}

size_t worker_depth(const struct worker *w)
{
    size_t depth = 1;
    for (size_t i = 0; i < w->conn.nprotocols; i++)
        if (w->conn.sessions[i].depth > depth)
            depth = w->conn.sessions[i].depth;
    return depth;
}

static void set_hooks(struct worker *w, size_t pipeline);

void worker_script(struct worker *w, struct script *main_script, size_t *pipeline)
{
    struct request r = {0};
    w->view = (struct script_thread){
        .addr = &w->route.addr,
        .stop = finish,
        .fail = fail,
        .exit = exit_run,
        .running = &w->running,
        .arg = w,
    };
    w->script = script_thread_new(w->cfg, &w->view);
    script_setup(main_script, &w->view);
    script_init(w->script, &r);
    if (w->index == 0)
        *pipeline = script_has_request(w->script) ? script_verify(w->script) : r.depth;
    worker_set_request(w, &r);
    set_hooks(w, *pipeline);
}

void worker_set_budget(struct worker *w, struct budget *budget) { w->conn.budget = budget; }

void worker_set_rate(struct worker *w)
{
    struct pace *p = &w->pace;
    spec_profile(&w->cfg->spec, &p->profile);
    /* With -d, what falls due at its end or later is not sent: rate x
     * duration requests, not the one due at the very end that a thread
     * could get to before the end reaches it. */
    uint64_t limit = w->cfg->spec.time_limit_us;
    p->end_us = limit ? (double)(w->cfg->spec.warmup_us + limit) : INFINITY;
    p->depth = w->conn.sessions[0].depth;
    /* Batch k of connection g goes when request (g + k C) depth is due:
     * one depth for every connection. */
    for (size_t i = 1; i < w->conn.nprotocols; i++)
        if (w->conn.sessions[i].depth != p->depth)
            die("-R with -m: -m pipelines the static request over HTTP/1.1 but opens streams "
                "over HTTP/2, so %s offers batches of two sizes: leave out -m, or offer one "
                "protocol",
                w->cfg->protocol_option);
    p->total = w->cfg->spec.connections;
    spec_turns(&w->cfg->spec, w->index, &p->first, &p->stride);
    schedule_init(&p->schedule, w->loop, w->nconns, conn_turn);
    w->conn.pace = p;
}

void worker_set_intervals(struct worker *w, struct intervals *iv) { w->intervals = iv; }

void worker_hold(struct worker *w) { w->live.held = true; }

void worker_go(struct worker *w, uint64_t start, bool sends)
{
    atomic_store_explicit(&w->start_sends, sends, memory_order_relaxed);
    atomic_store_explicit(&w->start_at, start, memory_order_release);
    ev_async_send(w->loop, &w->start_watcher);
}

/* After init() in the worker's Lua state: how many responses each
 * request() batch calls for, and the hooks its connections call. The
 * script's globals are looked up on every call, so a hook it defines,
 * replaces or removes during the run counts from then on. */
static void set_hooks(struct worker *w, size_t pipeline)
{
    struct conn_config *conn = &w->conn;
    w->pipeline = pipeline;
    bool request = script_has_request(w->script), delay = script_has_delay(w->script);
    bool response = script_response_wants(w->script, &w->live.wants.head, &w->live.wants.body);
    if (request)
        check_pipelining(w);
    /* Only a hook can define another during the run: a script with none now
     * never will, and its connections need not ask it anything. */
    if (!request && !delay && !response)
        return;
    /* Otherwise every batch and every response asks the script, which may
     * define request() or response() later; the depth stays the static
     * request's until a request() is defined. */
    conn->hooks.request = hook_request;
    for (size_t i = 0; request && i < conn->nprotocols; i++)
        conn->sessions[i].depth = pipeline;
    conn->hooks.delay = hook_delay;
    w->live.delay = delay;
    conn->hooks.response = hook_response;
}

/* A run shorter than one sample interval (a quick -n) would have no Req/Sec
 * sample at all; its one sample is then the whole run's rate. */
static void last_sample(struct worker *w)
{
    uint64_t now = clock_us(), requests = w->total.requests + w->stats.requests;
    if (hist_count(w->total.rps) + hist_count(w->stats.rps) == 0 && requests && now > w->sample_at)
        hist_record(w->stats.rps,
                    (uint64_t)((double)requests * 1e6 / (double)(now - w->sample_at)));
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct cpu_thread start, end;
    cpu_thread_now(&start);
    w->running = true;
    /* The loop was made before a script's setup or a --start-at wait: its
     * idea of now is stale, and timers set from it would fire at once. */
    ev_now_update(w->loop);
    w->sample_at = clock_us();
    /* The kernel may delay a timer by the thread's slack (50 us by default):
     * on a schedule, send on the microsecond. */
    if (w->cfg->spec.rate)
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (w->ring)
        uring_start(w->ring);
    /* In the closed model each connection sends as soon as it is open (or,
     * with --ramp-up, opens in its turn once the run starts); with -R, and
     * held for --start-at, they are all opened first, and the run starts
     * once they are. */
    for (size_t i = 0; i < w->nconns && !w->live.stopping && !w->cfg->spec.ramp_up_us; i++)
        conn_start(&w->conns[i], !w->conn.pace && !w->live.held);
    if (!w->live.stopping)
        ev_run(w->loop, 0);
    w->ended_at = clock_us();
    cpu_thread_now(&end);
    cpu_thread_since(&start, &end, &w->load);
    last_sample(w);
    for (size_t i = 0; i < w->nconns; i++)
        conn_stop(&w->conns[i]);
    if (w->ring)
        uring_finish(w->ring);
    atomic_store_explicit(&w->live_open, w->live.open, memory_order_relaxed);
    ev_timer_stop(w->loop, &w->interval_timer);
    if (w->warming) /* the run ended within the warm-up */
        end_warmup(w, clock_us());
    else
        cut(w); /* the last interval ends with the run */
    if (w->intervals)
        intervals_end(w->intervals, w->index);
    if ((w->finished || w->failure || w->exit_message) && w->events.finished)
        w->events.finished(w->events.arg, w->failure        ? WORKER_FAILED
                                          : w->exit_message ? WORKER_EXITED
                                                            : WORKER_FINISHED);
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

void worker_result(const struct worker *w, struct worker_result *out)
{
    *out = (struct worker_result){
        .total = &w->total,
        .warmup = &w->warmup,
        .load = w->load,
        .ended_at = w->ended_at,
        .retired = w->retired,
        .failure = w->failure,
        .exit_message = w->exit_message,
        .exit_status = w->exit_status,
        .profile = w->conn.pace ? &w->pace.profile : NULL,
        .by_source = w->by_source,
    };
}

void worker_live(struct worker *w, uint64_t *requests, uint64_t *errors)
{
    *requests = atomic_load_explicit(&w->live_requests, memory_order_relaxed);
    *errors = atomic_load_explicit(&w->live_errors, memory_order_relaxed);
}

uint64_t worker_open(struct worker *w)
{
    return atomic_load_explicit(&w->live_open, memory_order_relaxed);
}

void worker_free(struct worker *w)
{
    for (size_t i = 0; i < w->nconns; i++)
        conn_free(&w->conns[i]);
    free(w->conns);
    free(w->buf);
    for (size_t i = 0; i < PROTOCOLS_COUNT; i++)
        request_free(&w->requests[i]);
    schedule_free(&w->pace.schedule);
    uring_free(w->ring);
    sources_ports_free(&w->ports);
    free(w->by_source);
    buf_free(&w->absolute);
    profile_free(&w->pace.profile);
    script_free(w->script);
    free(w->failure);
    free(w->exit_message);
    stats_free(&w->stats);
    stats_free(&w->total);
    stats_free(&w->warmup); /* nothing without --warmup */
    ev_loop_destroy(w->loop);
    free(w);
}
