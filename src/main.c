/* volley: the run from start to finish. Parse the command line, find the
 * target, build the workers, print the header, run until the duration is
 * over (or Ctrl-C, or every worker ended on its own), then join the workers,
 * merge what they measured and print the report.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "cli.h"
#include "clock.h"
#include "merge.h"
#include "metrics.h"
#include "net.h"
#include "output.h"
#include "profile.h"
#include "progress.h"
#include "proxy.h"
#include "report.h"
#include "request.h"
#include "route.h"
#include "script.h"
#include "sources.h"
#include "threshold.h"
#include "timeline.h"
#include "tls.h"
#ifdef VOLLEY_HTTP3
#include "quic.h"
#include "quic_start.h"
#endif
#include "units.h"
#include "uring.h"
#include "worker.h"
#include "xalloc.h"

/* File descriptors besides the connections: stdio, each loop's epoll and
 * async descriptors (and its io_uring and the ring's eventfd), the
 * main loop's, and a margin for scripts. */
#define FD_MARGIN(threads) (16 + 6 * (threads))
/* --start-at: how late a start may be and still run, and how far ahead it
 * may be: further is more likely a mistyped date than a wait anyone means. */
#define START_GRACE_US 1000000
#define START_AHEAD_MAX_US (24 * 3600 * (int64_t)1000000)
/* --start-at: the last stretch before the instant is not one sleep (a
 * sleeper may be woken milliseconds late on a busy machine) but short ones,
 * which keep the thread one that the scheduler wakes promptly, and the very last
 * microseconds are spent reading the clock. */
#define START_NAP_FROM_US 5000
#define START_NAP_US 100
#define START_SPIN_US 300

struct run {
    struct ev_loop *loop;
    struct budget budget;
    ev_timer deadline;
    ev_signal sigint, sigterm;
    ev_async finished;
    ev_async settled;
    struct worker **workers;
    size_t nworkers;
    atomic_size_t nfinished;
    atomic_size_t nsettled;
    atomic_bool failed; /* a worker failed: the run ends without a report */
    atomic_bool exited; /* the script called os.exit() on a worker: the run ends */
    bool over;          /* ended before the deadline: interrupted, or done */
    int signal;         /* the signal that interrupted it, or 0 */
    bool going;         /* the workers were told to go (after any --start-at wait) */
    bool measuring;     /* what is measured began: the run went past any warm-up */
    ev_timer warmed;    /* --warmup: its end */
    struct timeline *timeline;
    /* --abort-on-fail: the thresholds checked as intervals are written,
     * while watching (the run is on); aborted once one stopped it */
    struct threshold_watch *watch;
    bool watching, aborted;
    struct threshold_abort abort;
    struct metrics *metrics; /* --metrics-listen, --remote-write; or NULL */
};

/* Resolve once and probe the addresses in order, as wrk does, so that a
 * wrong host or a closed port is a clear error before anything is sent. */
static struct net_addr find_target(const struct config *cfg)
{
    const struct url *u = &cfg->url;
    struct net_addr *addrs, found;
    size_t n;
    const char *why;
    int err = 0;
    uint64_t ms = cfg->spec.timeout_us / 1000;
    /* poll() takes an int, and a negative one means forever. */
    int timeout_ms = ms == 0 ? 1 : ms > INT_MAX ? INT_MAX : (int)ms;
    if (cfg->spec.unix_socket) {
        if (!net_unix_addr(cfg->spec.unix_socket, &found))
            die("invalid Unix socket path '%s': too long", cfg->spec.unix_socket);
        if ((err = net_probe(&found, timeout_ms)) != 0)
            die("unable to connect to %s: %s", cfg->spec.unix_socket, strerror(err));
        return found;
    }
    if (!net_lookup(u->host, u->service, &addrs, &n, &why))
        die("unable to resolve %s:%s: %s", u->host, u->service, why);
#ifdef VOLLEY_HTTP3
    /* HTTP/3: nothing answers a UDP socket's connect, so the probe is one
     * QUIC handshake (which checks the certificate and ALPN h3 as well). */
    if (spec_quic(&cfg->spec)) {
        char reason[512];
        for (size_t i = 0; i < n; i++) {
            if (quic_probe(&addrs[i], timeout_ms, reason, sizeof reason)) {
                found = addrs[i];
                free(addrs);
                return found;
            }
        }
        free(addrs);
        die("unable to connect to %s:%s over HTTP/3: %s", u->host, u->service, reason);
    }
#endif
    for (size_t i = 0; i < n; i++) {
        if ((err = net_probe(&addrs[i], timeout_ms)) == 0) {
            found = addrs[i];
            free(addrs);
            return found;
        }
    }
    free(addrs);
    die("unable to connect to %s:%s: %s", u->host, u->service, strerror(err));
}

/* How the connections go: to the target, or to the proxy and through it
 * (checked before the run: a proxy that cannot be reached or refuses stops
 * it), from the --bind addresses. */
static void find_route(struct config *cfg, struct route *route)
{
    memset(route, 0, sizeof *route);
    if (cfg->proxy.kind)
        proxy_find(&cfg->proxy, cfg->spec.timeout_us, &route->addr);
    else
        route->addr = find_target(cfg);
    if (cfg->sources.listed || cfg->sources.lo) {
        sources_ready(&cfg->sources, route->addr.sa.ss_family);
        route->sources = &cfg->sources;
    }
    route->ports_in_order = route->addr.sa.ss_family != AF_UNIX &&
                            sources_crowded(route->sources, cfg->spec.connections);
    if (cfg->proxy.kind)
        proxy_check(&cfg->proxy, &cfg->url, cfg->spec.timeout_us, route);
}

/* Over cleartext nothing negotiates: the one protocol asked for may take a
 * look at the target first (HTTP/2 with prior knowledge), so that a server
 * that does not speak it stops the run before it starts, as a TLS server
 * that refuses ALPN does in tls_check. */
static void probe_cleartext(const struct config *cfg, const struct route *route)
{
    const struct proto_ops *p = spec_only_protocol(&cfg->spec);
    char why[200];
    if (!p || !p->probe || p->probe(route, clock_us() + cfg->spec.timeout_us, why, sizeof why))
        return;
    if (cfg->spec.unix_socket)
        die("%s: %s %s", cfg->protocol_option, cfg->spec.unix_socket, why);
    die("%s: %s:%s %s", cfg->protocol_option, cfg->url.host, cfg->url.service, why);
}

/* --engine: io_uring where the kernel allows it, for a transport it
 * carries (plain TCP and Unix sockets: TLS and QUIC run on epoll), else epoll;
 * asked for by name, the one named or a one-line reason why not. */
static void pick_engine(struct config *cfg)
{
    char why[200];
    enum spec_engine asked = cfg->spec.engine;
    cfg->spec.engine = SPEC_ENGINE_EPOLL;
    if (asked == SPEC_ENGINE_EPOLL)
        return;
    if (spec_quic(&cfg->spec)) {
        if (asked == SPEC_ENGINE_IO_URING)
            die("%s: HTTP/3 runs on epoll (QUIC's datagrams are read and written in batches of "
                "their own)",
                cfg->engine_option);
        return;
    }
    if (cfg->spec.tls) {
        if (asked == SPEC_ENGINE_IO_URING)
            die("%s: an https URL runs on epoll (TLS is read and written through OpenSSL's "
                "socket calls)",
                cfg->engine_option);
        return;
    }
    if (uring_usable(why, sizeof why))
        cfg->spec.engine = SPEC_ENGINE_IO_URING;
    else if (asked == SPEC_ENGINE_IO_URING)
        die("%s: io_uring is not available here (%s)", cfg->engine_option, why);
}

static void check_fd_limit(const struct config *cfg)
{
    uint64_t limit = net_raise_nofile(), conns = cfg->spec.shard.connections;
    /* Not as a sum: -c near 2^64 would wrap it round and pass. */
    if (conns > limit)
        die("cannot open %" PRIu64 " connections: the open file limit is %" PRIu64
            " (raise it with ulimit -n)",
            conns, limit);
    /* Each thread's event loop needs descriptors of its own too. */
    if (limit - conns < FD_MARGIN(cfg->spec.threads))
        die("cannot open %" PRIu64 " connections: the open file limit is %" PRIu64
            " and volley needs %" PRIu64 " more for -t %" PRIu64 " (raise it with ulimit -n)",
            conns, limit, (uint64_t)FD_MARGIN(cfg->spec.threads), cfg->spec.threads);
}

/* The request wrk sends without a script: the path, Host unless -H gave
 * one, then the -H headers. Without a body there is no Content-Length. */
static struct request static_request(const struct config *cfg)
{
    struct header *headers = xcalloc(cfg->spec.nheaders + 1, sizeof *headers);
    size_t n = 0, len;
    char *host = url_host_header(&cfg->url);
    char err[128];
    struct request r = {0};
    if (!spec_header(&cfg->spec, "Host"))
        headers[n++] = (struct header){(char *)"Host", host};
    for (size_t i = 0; i < cfg->spec.nheaders; i++)
        if (strcasecmp(cfg->spec.headers[i].name, "Content-Length") != 0)
            headers[n++] = cfg->spec.headers[i];
    char *data = request_format("GET", cfg->url.path, headers, n, NULL, 0, &len);
    if (!request_set(&r, data, len, err, sizeof err))
        die("invalid request: %s", err);
    free(host);
    free(headers);
    return r;
}

static void on_end(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)t, (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static void on_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    (void)revents;
    struct run *run = s->data;
    if (!run->signal)
        run->signal = s->signum;
    run->over = true;
    ev_break(loop, EVBREAK_ALL);
}

/* What is measured begins: the timeline's files are written from here. */
static void begin_measuring(struct run *run)
{
    run->measuring = true;
    timeline_begin(run->timeline);
}

static void on_warmed(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    begin_measuring(t->data);
}

/* Runs on a worker's thread, when it ended on its own, failed or exited. */
static void worker_finished(void *arg, enum worker_end how)
{
    struct run *run = arg;
    if (how == WORKER_FAILED)
        atomic_store(&run->failed, true);
    else if (how == WORKER_EXITED)
        atomic_store(&run->exited, true);
    else
        atomic_fetch_add(&run->nfinished, 1);
    ev_async_send(run->loop, &run->finished);
}

/* Runs on a worker's thread, with -R. */
static void worker_settled(void *arg)
{
    struct run *run = arg;
    atomic_fetch_add(&run->nsettled, 1);
    ev_async_send(run->loop, &run->settled);
}

static void on_settled(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)revents;
    struct run *run = a->data;
    if (atomic_load(&run->nsettled) == run->nworkers)
        ev_break(loop, EVBREAK_ALL);
}

/* Runs on the worker thread that resolved the last request of -n. */
static void budget_spent(void *arg)
{
    struct run *run = arg;
    ev_async_send(run->loop, &run->finished);
}

static void on_finished(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)revents;
    struct run *run = a->data;
    if (atomic_load(&run->failed) || atomic_load(&run->exited) ||
        atomic_load(&run->nfinished) == run->nworkers || budget_done(&run->budget)) {
        run->over = true;
        ev_break(loop, EVBREAK_ALL);
    }
}

/* Each interval, as it is written: into the live metrics, and judged by
 * --abort-on-fail while the run is on. */
static void on_interval(void *arg, const struct stats *s, uint64_t index, uint64_t start_us,
                        uint64_t length_us)
{
    struct run *run = arg;
    if (run->metrics)
        metrics_interval(run->metrics, s, start_us, length_us);
    if (!run->watch || !run->watching || run->aborted)
        return;
    if (threshold_watch_interval(run->watch, s, index, start_us, length_us, &run->abort)) {
        run->aborted = run->over = true;
        ev_break(run->loop, EVBREAK_ALL);
    }
}

/* Returns the number of requests per batch. */
static size_t create_workers(struct run *run, const struct config *cfg, const struct route *route,
                             struct script *main_script)
{
    struct request plain = {0};
    size_t pipeline = 1;
    const struct worker_events events = {worker_finished, worker_settled, run};
    if (cfg->spec.requests)
        budget_init(&run->budget, cfg->spec.shard.requests, budget_spent, run);
    if (!main_script)
        plain = static_request(cfg);
    run->nworkers = (size_t)cfg->spec.threads;
    run->workers = xcalloc(run->nworkers, sizeof *run->workers);
    for (size_t i = 0; i < run->nworkers; i++) {
        size_t share = worker_share(cfg->spec.shard.connections, cfg->spec.threads, i);
        struct worker *w = worker_new(i, cfg, share, route, &events);
        if (cfg->spec.requests)
            worker_set_budget(w, &run->budget);
        run->workers[i] = w;
        if (main_script) {
            worker_script(w, main_script, &pipeline);
        } else {
            struct request copy = request_copy(&plain);
            worker_set_request(w, &copy);
        }
    }
    request_free(&plain);
    return worker_depth(run->workers[0]);
}

static double seconds_between(struct timeval from, struct timeval to)
{
    return (double)(to.tv_sec - from.tv_sec) + (double)(to.tv_usec - from.tv_usec) / 1e6;
}

/* The wall clock, Unix time in us. */
static int64_t realtime_us(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

/* How late it is for --start-at, in us (negative when early). A start a
 * little late (a slow pod, a loaded machine) still runs; one long past, or
 * more than a day ahead, is an error. */
static int64_t start_lateness(const struct config *cfg)
{
    int64_t late_us = realtime_us() - cfg->start_at_us;
    if (late_us > START_GRACE_US)
        die("start time %s is %.3f s in the past", cfg->start_at, (double)late_us / 1e6);
    if (late_us < -START_AHEAD_MAX_US)
        die("start time %s is %.0f hours ahead: volley waits at most 24 hours (a mistyped "
            "date?)",
            cfg->start_at, (double)-late_us / 3600e6);
    return late_us;
}

/* "Starting at 2026-11-23T10:30:00.000Z, in 12.345s" (or "0.250s late"),
 * once, on stderr: the wait is not silent. */
static void say_start(const struct config *cfg, int64_t late_us)
{
    struct timespec at = units_timespec(cfg->start_at_us);
    char when[UNITS_BUF];
    fflush(stdout);
    if (late_us <= 0)
        fprintf(stderr, "Starting at %s, in %.3fs\n", units_utc_time(&at, when),
                (double)-late_us / 1e6);
    else
        fprintf(stderr, "Starting at %s, %.3fs late\n", units_utc_time(&at, when),
                (double)late_us / 1e6);
}

/* --start-at: wait until the wall-clock instant, so that shards on machines
 * with synchronised clocks start together: asleep (with a countdown on a
 * terminal) until START_NAP_FROM_US before it, then in naps of
 * START_NAP_US, then the last START_SPIN_US on the clock itself. Ctrl-C
 * ends the wait (and the run). Notes how late the wait ended in r; returns
 * the instant on clock_us's clock: -R's schedule
 * starts there even if this process woke late, so the shards' send times
 * still interleave. */
static uint64_t wait_for_start(struct run *run, const struct config *cfg, struct result *r)
{
    int64_t wake_us = cfg->start_at_us - START_NAP_FROM_US;
    bool countdown = progress_countdown_wanted(cfg);
    say_start(cfg, start_lateness(cfg));
    /* The kernel may wake a sleeper up to its timer slack late (50 us by
     * default); ask for none. TIMER_ABSTIME on CLOCK_REALTIME follows any
     * adjustment of the clock while asleep. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    while (!run->over) {
        /* On a terminal the countdown is redrawn at each whole second before
         * the start; the last sleep ends START_NAP_FROM_US before it. */
        int64_t until_us = wake_us;
        int64_t left_us = cfg->start_at_us - realtime_us();
        if (countdown && left_us > 0) {
            progress_countdown((uint64_t)left_us);
            int64_t step = left_us > 1000000 ? (left_us - 1) % 1000000 + 1 : left_us;
            if (cfg->start_at_us - left_us + step < until_us)
                until_us = cfg->start_at_us - left_us + step;
        }
        struct timespec until = units_timespec(until_us);
        /* A signal interrupts the sleep: libev's handler has noted it, and
         * its watcher (on_signal) ends the run when the loop looks. */
        int rc = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, NULL);
        if (rc == EINTR)
            ev_run(run->loop, EVRUN_NOWAIT);
        else if (until_us == wake_us)
            break;
    }
    if (countdown)
        progress_countdown(0);
    const struct timespec nap = {.tv_nsec = START_NAP_US * 1000};
    while (!run->over && start_lateness(cfg) < -START_SPIN_US) {
        nanosleep(&nap, NULL);
        ev_run(run->loop, EVRUN_NOWAIT);
    }
    while (!run->over && start_lateness(cfg) < 0)
        ;
    uint64_t mono = clock_us();
    int64_t late_us = start_lateness(cfg);
    r->start_late_us = late_us > 0 ? (uint64_t)late_us : 0;
    r->start_late_known = !run->over; /* not when Ctrl-C ended the wait */
    return (uint64_t)((int64_t)mono - late_us);
}

/* With -R the connections are all opened before the first request is due:
 * wait until every one has been opened or has failed (within --timeout, the
 * connect timeout), or the run is interrupted. */
static void wait_settled(struct run *run, const struct config *cfg)
{
    ev_timer limit;
    ev_async_init(&run->settled, on_settled);
    run->settled.data = run;
    ev_async_start(run->loop, &run->settled);
    ev_timer_init(&limit, on_end, (double)cfg->spec.timeout_us / 1e6, 0.);
    ev_timer_start(run->loop, &limit);
    if (atomic_load(&run->nsettled) < run->nworkers && !run->over)
        ev_run(run->loop, 0);
    ev_timer_stop(run->loop, &limit);
    ev_async_stop(run->loop, &run->settled);
}

/* A worker failed (a script error): its message, once every worker is
 * joined; the run has no report. */
static const char *run_failure(const struct run *run)
{
    struct worker_result w;
    for (size_t i = 0; i < run->nworkers; i++) {
        worker_result(run->workers[i], &w);
        if (w.failure)
            return w.failure;
    }
    return NULL;
}

/* The script called os.exit() on a worker: the first worker's call (its
 * exit_message and exit_status), once every worker is joined; false if
 * none did. */
static bool run_exit(const struct run *run, struct worker_result *exited)
{
    for (size_t i = 0; i < run->nworkers; i++) {
        worker_result(run->workers[i], exited);
        if (exited->exit_message)
            return true;
    }
    return false;
}

/* Why the run ended, once every worker is joined. */
static struct run_end run_end(struct run *run, const struct config *cfg)
{
    struct worker_result exited;
    if (run_exit(run, &exited))
        return (struct run_end){.reason = END_SCRIPT_EXIT, .status = exited.exit_status};
    if (run->aborted)
        return (struct run_end){.reason = END_ABORTED};
    if (run->signal)
        return (struct run_end){.reason = END_INTERRUPTED, .signal = run->signal};
    if (cfg->spec.requests && budget_done(&run->budget))
        return (struct run_end){.reason = END_COMPLETED};
    if (atomic_load(&run->nfinished) == run->nworkers)
        return (struct run_end){.reason = END_STOPPED};
    return (struct run_end){.reason = END_COMPLETED};
}

/* Interrupted, or os.exit() called, before what is measured began (in a
 * --start-at wait, while -R's connections opened, in the warm-up): there is
 * no result to write. */
static bool ended_before_measuring(const struct run *run, const struct run_end *end)
{
    return !run->measuring && (end->reason == END_INTERRUPTED || end->reason == END_SCRIPT_EXIT);
}

/* The run ended before what it measures began: no report, and no file
 * written (see ended_before_measuring); says why, and returns the exit
 * status: os.exit()'s, or 1. */
static int not_measured(const struct run *run, const struct run_end *end)
{
    const char *when = run->going ? "during the warm-up" : "before the run started";
    const char *sig = run_end_signal_name(end->signal);
    struct worker_result exited;
    fflush(stdout);
    if (run_exit(run, &exited)) {
        fprintf(stderr, "volley: %s: the run was stopped %s: nothing was measured\n",
                exited.exit_message, when);
        return end->status;
    }
    fprintf(stderr, "volley: interrupted by %s %s: nothing was measured, no result written\n",
            sig ? sig : "a signal", when);
    return 1;
}

/* Start the workers and wait for the end of the run; note its length,
 * volley's CPU time over it (RUSAGE_SELF covers every thread) and how busy
 * the busiest worker thread was. */
static void run_workers(struct run *run, const struct config *cfg, struct result *r)
{
    struct rusage before, after;
    uint64_t at = 0;
    run->loop = ev_default_loop(EVFLAG_AUTO);
    ev_timer_init(&run->deadline, on_end, 0., 0.);
    ev_signal_init(&run->sigint, on_signal, SIGINT);
    ev_signal_init(&run->sigterm, on_signal, SIGTERM);
    run->sigint.data = run->sigterm.data = run;
    ev_async_init(&run->finished, on_finished);
    run->finished.data = run;
    ev_signal_start(run->loop, &run->sigint);
    ev_signal_start(run->loop, &run->sigterm);
    ev_async_start(run->loop, &run->finished);

    struct intervals *intervals = timeline_attach(run->timeline, run->loop, run->nworkers);
    if (run->metrics)
        metrics_attach(run->metrics, run->loop, run->workers, run->nworkers, run->timeline);
    /* --start-at: the connections are all opened first (and TLS done), in
     * the closed model held until the instant; with -R the schedule starts
     * there. Only --ramp-up, which opens them in their turns once the run
     * starts, waits first. */
    bool held = cfg->start_at && !cfg->spec.rate && !cfg->spec.ramp_up_us;
    if (cfg->start_at && cfg->spec.ramp_up_us)
        at = wait_for_start(run, cfg, r);
    for (size_t i = 0; i < run->nworkers; i++) {
        if (cfg->spec.rate)
            worker_set_rate(run->workers[i]);
        if (held)
            worker_hold(run->workers[i]);
        worker_set_intervals(run->workers[i], intervals);
        worker_start(run->workers[i]);
    }
    if (cfg->spec.rate || held)
        wait_settled(run, cfg);
    if (cfg->start_at && !cfg->spec.ramp_up_us && !run->over)
        at = wait_for_start(run, cfg, r);
    getrusage(RUSAGE_SELF, &before);
    clock_gettime(CLOCK_REALTIME, &r->started);
    uint64_t start = clock_us();
    ev_now_update(run->loop);
    /* With -R and --start-at the run (its schedule, intervals and length)
     * starts at the instant asked for, even if this process woke a little
     * late: it sends what fell due since at once, each request's lag
     * saying how late, and ends with the shards that were on time. */
    if (cfg->start_at && cfg->spec.rate && at < start) {
        r->started = units_timespec(cfg->start_at_us);
        start = at;
    }
    /* -n alone runs until its requests are done; with -d, whichever ends
     * first (the warm-up before it); -d 0 until Ctrl-C. */
    if (cfg->spec.time_limit_us) {
        uint64_t end = start + cfg->spec.time_limit_us + cfg->spec.warmup_us, now = clock_us();
        ev_timer_set(&run->deadline, end > now ? (double)(end - now) / 1e6 : 0., 0.);
        ev_timer_start(run->loop, &run->deadline);
    }
    /* What is measured starts after the warm-up, and its record with it. */
    r->started.tv_sec += (time_t)(cfg->spec.warmup_us / 1000000);
    r->started.tv_nsec += (long)(cfg->spec.warmup_us % 1000000 * 1000);
    if (r->started.tv_nsec >= 1000000000) {
        r->started.tv_sec++;
        r->started.tv_nsec -= 1000000000;
    }
    timeline_start(run->timeline, start + cfg->spec.warmup_us, &r->started);
    if (run->metrics)
        metrics_start(run->metrics, &r->started);
    if (cfg->spec.warmup_us) {
        uint64_t now = clock_us(), end = start + cfg->spec.warmup_us;
        ev_timer_init(&run->warmed, on_warmed, end > now ? (double)(end - now) / 1e6 : 0., 0.);
        run->warmed.data = run;
        ev_timer_start(run->loop, &run->warmed);
    } else if (!run->over) {
        begin_measuring(run);
    }
    run->going = !run->over;
    for (size_t i = 0; i < run->nworkers; i++)
        worker_go(run->workers[i], start, !run->over);
    struct progress *progress =
        progress_start(run->loop, cfg, run->workers, run->nworkers, start, run->timeline);
    run->watching = run->watch != NULL;
    if (!run->over)
        ev_run(run->loop, 0);
    run->watching = false;
    if (cfg->spec.warmup_us)
        ev_timer_stop(run->loop, &run->warmed);
    progress_end(progress);
    /* From here a second Ctrl-C ends volley at once (libev puts the default
     * action back): a thread stuck in a script hook would never be joined. */
    ev_signal_stop(run->loop, &run->sigint);
    ev_signal_stop(run->loop, &run->sigterm);
    for (size_t i = 0; i < run->nworkers; i++)
        worker_stop(run->workers[i]);
    for (size_t i = 0; i < run->nworkers; i++)
        worker_join(run->workers[i]);
    /* The run ended when its last worker's did (its connections closed
     * after, as wrk's are not closed at all); how busy their threads were. */
    uint64_t ended = start;
    r->cpu.has_wait = true;
    for (size_t i = 0; i < run->nworkers; i++) {
        struct worker_result w;
        worker_result(run->workers[i], &w);
        if (w.ended_at > ended)
            ended = w.ended_at;
        r->cpu.wait_s += w.load.wait_s;
        r->cpu.has_wait &= w.load.has_wait;
        if (w.load.busy > r->cpu.busiest)
            r->cpu.busiest = w.load.busy;
    }
    uint64_t elapsed = ended - start;
    r->runtime_us = elapsed > cfg->spec.warmup_us ? elapsed - cfg->spec.warmup_us : 0;
    r->end = run_end(run, cfg);
    if (run_failure(run))
        timeline_finish(run->timeline, r->runtime_us, NULL);
    else if (ended_before_measuring(run, &r->end))
        timeline_abandon(run->timeline);
    else
        timeline_finish(run->timeline, r->runtime_us, &r->end);
    getrusage(RUSAGE_SELF, &after);
    r->cpu.user_s = seconds_between(before.ru_utime, after.ru_utime);
    r->cpu.system_s = seconds_between(before.ru_stime, after.ru_stime);
}

/* request() returned nil on some connections: as in wrk, those sent
 * nothing more; say so once, after the run. */
static void report_retired(const struct run *run, const struct config *cfg)
{
    size_t n = 0;
    for (size_t i = 0; i < run->nworkers; i++) {
        struct worker_result w;
        worker_result(run->workers[i], &w);
        n += w.retired;
    }
    if (n)
        fprintf(stderr,
                "volley: %s: request() returned nil on %zu connection%s, which then sent no "
                "more requests\n",
                cfg->spec.script, n, n == 1 ? "" : "s");
}

/* -R: what was asked of this process over the part of the run that ran: its
 * share of -R; with --stages, of the requests their profile made due between
 * the end of the warm-up and the end of the run, over its length. A run cut
 * short half-way up a ramp was asked the lower half's rate, not the mean of
 * the whole; one that ran its course, the stages' mean over the time it took
 * (a little longer than they last, the time to stop). */
static double rate_target(const struct run *run, const struct config *cfg, const struct result *r)
{
    const struct run_spec *spec = &cfg->spec;
    struct worker_result w;
    if (!spec->rate || !spec->nstages || !r->runtime_us)
        return (double)spec->shard.rate;
    worker_result(run->workers[0], &w);
    double from = (double)spec->warmup_us, to = from + (double)r->runtime_us;
    double due = profile_requests(w.profile, to) - profile_requests(w.profile, from);
    return due * spec_rate_share(spec) * 1e6 / (double)r->runtime_us;
}

/* The workers' statistics, added up into r: the run's and the warm-up's. */
static void gather_stats(struct run *run, const struct config *cfg, struct result *r,
                         struct stats *warmup)
{
    struct worker_result w;
    stats_init(&r->stats);
    if (cfg->spec.warmup_us)
        stats_init(warmup);
    for (size_t i = 0; i < run->nworkers; i++) {
        worker_result(run->workers[i], &w);
        stats_merge(&r->stats, w.total);
        if (cfg->spec.warmup_us)
            stats_merge(warmup, w.warmup);
    }
    r->warmup = cfg->spec.warmup_us ? warmup : NULL;
}

/* --bind: what the connections did from each source address, added up
 * over the workers; NULL without. */
static struct result_source *gather_sources(struct run *run, const struct sources *s)
{
    if (!s->listed)
        return NULL;
    struct result_source *list = xcalloc(s->n, sizeof *list);
    for (size_t i = 0; i < s->n; i++)
        sources_addr_text(&s->addrs[i], list[i].address, sizeof list[i].address);
    for (size_t w = 0; w < run->nworkers; w++) {
        struct worker_result res;
        worker_result(run->workers[w], &res);
        for (size_t i = 0; i < s->n; i++) {
            list[i].connects += res.by_source[i].connects;
            list[i].errors += res.by_source[i].errors;
        }
    }
    return list;
}

/* --threshold: the verdicts after the report; false when one failed. */
static bool judge(struct run *run, const struct config *cfg, struct result *r,
                  struct threshold_verdict *verdicts)
{
    if (!cfg->nthresholds)
        return true;
    r->aborted = run->aborted ? &run->abort : NULL;
    bool passed = threshold_judge(cfg->thresholds, cfg->nthresholds, &r->stats,
                                  r->warmup ? r->warmup->connect : NULL, r->runtime_us,
                                  cfg->spec.timeout_us, r->aborted, verdicts);
    r->verdicts = verdicts;
    r->nverdicts = cfg->nthresholds;
    threshold_print(stdout, verdicts, cfg->nthresholds, r->aborted);
    return passed;
}

/* No output may write over another, over the script or over the report. */
static void check_outputs(const struct config *cfg)
{
    const struct output_use uses[] = {
        {"--json", cfg->json, NULL},
        {"--timeline", cfg->spec.timeline, NULL},
        {"--hdr-log", cfg->spec.hdr_log, NULL},
        {"-s", cfg->spec.script, "the script"},
    };
    output_check_distinct(uses, sizeof uses / sizeof uses[0]);
}

static void free_run(struct run *run)
{
    for (size_t i = 0; i < run->nworkers; i++)
        worker_free(run->workers[i]);
    free(run->workers);
    timeline_free(run->timeline);
    threshold_watch_free(run->watch);
    metrics_free(run->metrics);
    ev_loop_destroy(run->loop);
}

/* The run's TLS contexts: OpenSSL's (HTTPS), GnuTLS's (HTTP/3). */
static void crypto_cleanup(void)
{
    tls_cleanup();
#ifdef VOLLEY_HTTP3
    quic_cleanup();
#endif
}

int main(int argc, char **argv)
{
    struct config cfg;
    struct run run = {0};
    struct result result = {.spec = &cfg.spec};
    struct output_json json;

    output_reserve_stdio();
    if (argc > 1 && strcmp(argv[1], "merge") == 0)
        return merge_main(argc - 1, argv + 1);
    cli_parse(argc, argv, &cfg);
    pick_engine(&cfg);
    check_outputs(&cfg);
    if (cfg.start_at) /* now, not only after the set-up */
        start_lateness(&cfg);
    if (cfg.spec.tls && !spec_quic(&cfg.spec))
        tls_setup(&cfg);
#ifdef VOLLEY_HTTP3
    if (spec_quic(&cfg.spec))
        quic_setup(&(struct quic_options){.tls = {.host = cfg.url.host,
                                                  .sni = cfg.sni,
                                                  .verify = cfg.verify,
                                                  .cacert = cfg.cacert,
                                                  .cert = cfg.cert,
                                                  .key = cfg.key,
                                                  .early_data = cfg.early_data},
                                          .ecn = cfg.ecn});
#endif
    signal(SIGPIPE, SIG_IGN);
    if (cfg.json)
        output_json_open(&json, cfg.json);
    /* The metrics port is taken now: one in use stops volley before anything. */
    run.metrics = metrics_new(&cfg);
    result.metrics = run.metrics;
    struct script *main_script = cfg.spec.script ? script_main_new(&cfg) : NULL;
    struct route route;
    find_route(&cfg, &route);
    if (cfg.spec.tls && !spec_quic(&cfg.spec))
        tls_check(&cfg, &route);
    else
        probe_cleartext(&cfg, &route);
    check_fd_limit(&cfg);
    /* Once the target is known to answer: a start that fails leaves an
     * earlier timeline alone. */
    run.timeline = timeline_new(&cfg.spec, cfg.server_pids, cfg.nserver_pids);
    result.timeline = run.timeline;
    result.pipeline = create_workers(&run, &cfg, &route, main_script);
    if (cfg.abort_after)
        run.watch = threshold_watch_new(cfg.thresholds, cfg.nthresholds, cfg.abort_after,
                                        cfg.spec.timeout_us);
    timeline_on_interval(run.timeline, on_interval, &run);

    report_header(stdout, &cfg.spec);
    output_check();
    run_workers(&run, &cfg, &result);
    const char *failure = run_failure(&run);
    int early = -1;
    if (failure) {
        fflush(stdout);
        fprintf(stderr, "volley: %s\n", failure);
        early = 1;
    } else if (ended_before_measuring(&run, &result.end)) {
        early = not_measured(&run, &result.end);
    }
    if (early >= 0) {
        if (cfg.json)
            output_json_abandon(&json);
        free_run(&run);
        script_free(main_script);
        crypto_cleanup();
        cli_free(&cfg);
        return early;
    }

    struct stats warmup;
    struct threshold_verdict *verdicts = xcalloc(cfg.nthresholds + 1, sizeof *verdicts);
    gather_stats(&run, &cfg, &result, &warmup);
    struct result_source *sources = gather_sources(&run, &cfg.sources);
    result.sources = sources;
    result.nsources = sources ? cfg.sources.n : 0;
    result.rate_target = rate_target(&run, &cfg, &result);
    if (run.metrics)
        metrics_final(run.metrics, &result);
    report_text(stdout, &result);
    bool passed = judge(&run, &cfg, &result, verdicts);
    output_flush_stdout();
    /* Warnings go to stderr: scripts that parse the lines after
     * Transfer/sec (a done() hook's output) are not disturbed. */
    report_warnings(stderr, &result);
    report_retired(&run, &cfg);
    /* Remote write delivers the final figures, and /metrics lingers, before
     * the document says how that went; both before done(), so that an error
     * or a Ctrl-C in it cannot lose the result. */
    bool delivered = metrics_finish(run.metrics);
    if (cfg.json)
        output_json_write(&json, report_json, &result);
    /* os.exit() in a hook ended the script's part: done() is not called. */
    struct worker_result exited;
    int status = passed ? 0 : 2;
    if (run_exit(&run, &exited)) {
        fflush(stdout);
        fprintf(stderr, "volley: %s: the run was stopped\n", exited.exit_message);
        status = exited.exit_status;
    } else if (main_script) {
        script_done(main_script, &result);
    }
    timeline_check(run.timeline);
    output_check();

    free_run(&run);
    free(sources);
    free(verdicts);
    if (result.warmup)
        stats_free(&warmup);
    stats_free(&result.stats);
    script_free(main_script);
    crypto_cleanup();
    cli_free(&cfg);
    /* A failed threshold is an outcome of a run that completed: 2, not 1;
     * os.exit()'s status is the script's to choose; --remote-write-strict
     * makes a push that never arrived an error. */
    return delivered ? status : 1;
}
