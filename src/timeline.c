/* Results over time, main's side. Interval k covers [k T, (k + 1) T) from
 * the run's start, T being --interval; the last one ends with the run. An
 * interval is written (timeline_file.c) as soon as every worker has
 * delivered it and its end has passed; one delivered early (every worker
 * ended on its own) may be the last, so it waits for the end of the run.
 * The server's CPU time is read as each is written; a summary of them is
 * kept (timeline_summary.c).
 * SPDX-License-Identifier: MIT */
#include "timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "interval.h"
#include "json.h"
#include "spec.h"
#include "timeline_file.h"
#include "timeline_summary.h"
#include "xalloc.h"

struct timeline {
    const struct run_spec *spec;
    struct intervals *intervals;
    struct ev_loop *loop;
    ev_async ready;
    uint64_t start; /* clock_us */
    struct timespec started;
    int64_t origin_us;           /* when interval 0 starts, Unix time in us */
    struct timeline_files files; /* --timeline, --hdr-log */
    struct server_cpu *server;
    struct server_times server_start, server_last;
    ev_timer server_sample;
    /* called with each interval written (--abort-on-fail) */
    void (*on_interval)(void *arg, const struct stats *s, uint64_t index, uint64_t start_us,
                        uint64_t length_us);
    void *on_interval_arg;
    struct {
        bool known;
        struct server_times cpu;
        pid_t *pids;
        size_t npids;
    } given;            /* volley merge: the server's CPU time as the parts measured it */
    struct stats *held; /* taken, not yet written: it may be the last */
    uint64_t held_index;
    struct timeline_summary summary; /* of the intervals written */
};

struct timeline *timeline_new(const struct run_spec *spec, char *const *server_pids,
                              size_t nserver_pids)
{
    struct timeline *t = xcalloc(1, sizeof *t);
    t->spec = spec;
    timeline_files_open(&t->files, spec);
    if (nserver_pids)
        t->server = server_cpu_open(server_pids, nserver_pids);
    return t;
}

void timeline_free(struct timeline *t)
{
    if (!t)
        return;
    /* an interval taken but never written (the run was abandoned) */
    if (t->held)
        intervals_give_back(t->intervals, t->held);
    intervals_free(t->intervals);
    server_cpu_free(t->server);
    free(t->given.pids);
    free(t);
}

/* ---- the intervals ------------------------------------------------------- */

/* A difference of CPU times, which are whole clock ticks, without the
 * rounding noise of the subtraction (0.01, not 0.009999999999999997). */
static double cpu_between(double from, double to) { return round((to - from) * 1e6) / 1e6; }

/* Writes the record to the files and notes it for the summary. */
static void write_record(struct timeline *t, const struct timeline_record *r)
{
    timeline_begin(t);
    timeline_files_write(&t->files, r);
    timeline_summary_add(&t->summary, r, t->spec->interval_us);
}

/* Writes interval index, of length_us, and gives its statistics back; the
 * server's CPU time in it is what it used since the last record. */
static void emit(struct timeline *t, struct stats *s, uint64_t index, uint64_t length_us)
{
    struct timeline_record r = {index, index * t->spec->interval_us, length_us, s, NAN};
    if (t->server) {
        struct server_times now;
        server_cpu_read(t->server, &now);
        r.server_s =
            cpu_between(t->server_last.user_s + t->server_last.system_s, now.user_s + now.system_s);
        t->server_last = now;
    }
    write_record(t, &r);
    if (t->on_interval)
        t->on_interval(t->on_interval_arg, s, index, r.start_us, length_us);
    intervals_give_back(t->intervals, s);
}

void timeline_add(struct timeline *t, const struct stats *s, uint64_t index, uint64_t length_us,
                  double server_s)
{
    struct timeline_record r = {index, index * t->spec->interval_us, length_us, s, server_s};
    write_record(t, &r);
}

/* Takes every complete interval; each but the newest is followed by another,
 * so it ran its full length. */
static void drain(struct timeline *t)
{
    uint64_t index;
    struct stats *s;
    while ((s = intervals_take(t->intervals, &index))) {
        if (t->held)
            emit(t, t->held, t->held_index, t->spec->interval_us);
        t->held = s;
        t->held_index = index;
    }
}

static void on_ready(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)loop, (void)revents;
    struct timeline *t = a->data;
    drain(t);
    uint64_t end = (t->held_index + 1) * t->spec->interval_us;
    if (t->held && clock_us() >= t->start + end) {
        emit(t, t->held, t->held_index, t->spec->interval_us);
        t->held = NULL;
    }
}

struct intervals *timeline_attach(struct timeline *t, struct ev_loop *loop, size_t nworkers)
{
    t->loop = loop;
    ev_async_init(&t->ready, on_ready);
    t->ready.data = t;
    ev_async_start(loop, &t->ready);
    t->intervals = intervals_new(nworkers, loop, &t->ready);
    return t->intervals;
}

void timeline_on_interval(struct timeline *t,
                          void (*fn)(void *arg, const struct stats *s, uint64_t index,
                                     uint64_t start_us, uint64_t length_us),
                          void *arg)
{
    t->on_interval = fn;
    t->on_interval_arg = arg;
}

/* A server process that exits and is not waited for by one measured counts
 * with what it used when last read: read them often, not only at the end of
 * each interval. */
#define SERVER_SAMPLE_S 0.1

static void on_server_sample(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    server_cpu_sample(((struct timeline *)w->data)->server);
}

void timeline_start(struct timeline *t, uint64_t start, const struct timespec *started)
{
    struct timespec now;
    t->start = start;
    t->started = *started;
    /* start on the wall clock: with -R and --start-at, the instant asked
     * for, before started when the process woke late */
    clock_gettime(CLOCK_REALTIME, &now);
    /* (start is ahead of now by a --warmup) */
    t->origin_us =
        (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000 - ((int64_t)clock_us() - (int64_t)start);
}

void timeline_begin(struct timeline *t)
{
    if (t->files.begun)
        return;
    /* the server's CPU time counts from here, as the intervals do: a
     * warm-up's is left out with everything else it did */
    if (t->server) {
        server_cpu_read(t->server, &t->server_start);
        t->server_last = t->server_start;
        ev_timer_init(&t->server_sample, on_server_sample, SERVER_SAMPLE_S, SERVER_SAMPLE_S);
        t->server_sample.data = t;
        ev_timer_start(t->loop, &t->server_sample);
    }
    timeline_files_begin(&t->files, &t->started, t->origin_us);
}

void timeline_start_merged(struct timeline *t, const struct timespec *started, int64_t origin_us)
{
    t->started = *started;
    t->origin_us = origin_us;
    timeline_begin(t);
}

void timeline_check(const struct timeline *t) { timeline_files_check(&t->files); }

void timeline_close(struct timeline *t) { timeline_files_close(&t->files); }

void timeline_set_measured(struct timeline *t, uint32_t measured) { t->files.measured = measured; }

void timeline_end(struct timeline *t, const struct run_end *end, uint64_t duration_us)
{
    timeline_begin(t);
    timeline_files_end(&t->files, end, duration_us);
}

void timeline_finish(struct timeline *t, uint64_t runtime_us, const struct run_end *end)
{
    ev_async_stop(t->loop, &t->ready);
    if (t->server && t->files.begun)
        ev_timer_stop(t->loop, &t->server_sample);
    drain(t);
    if (t->held) {
        uint64_t start = t->held_index * t->spec->interval_us;
        emit(t, t->held, t->held_index, runtime_us > start ? runtime_us - start : 0);
        t->held = NULL;
    }
    if (end)
        timeline_end(t, end, runtime_us);
    timeline_close(t);
}

void timeline_abandon(struct timeline *t)
{
    if (t->files.begun) {
        timeline_finish(t, 0, NULL);
        return;
    }
    ev_async_stop(t->loop, &t->ready);
    timeline_files_abandon(&t->files);
}

bool timeline_last(const struct timeline *t, double *rate, uint64_t *p99, bool *has_p99)
{
    return timeline_summary_last(&t->summary, rate, p99, has_p99);
}

bool timeline_server_cpu(const struct timeline *t, struct server_times *cpu)
{
    if (t->given.known) {
        *cpu = t->given.cpu;
        return true;
    }
    if (!t->server)
        return false;
    cpu->user_s = cpu_between(t->server_start.user_s, t->server_last.user_s);
    cpu->system_s = cpu_between(t->server_start.system_s, t->server_last.system_s);
    return true;
}

void timeline_set_server(struct timeline *t, const pid_t *pids, size_t n,
                         const struct server_times *cpu)
{
    free(t->given.pids);
    t->given.pids = xcalloc(n ? n : 1, sizeof *pids);
    memcpy(t->given.pids, pids, n * sizeof *pids);
    t->given.npids = n;
    t->given.cpu = *cpu;
    t->given.known = true;
}

/* ---- --json ----------------------------------------------------------------- */

static void json_server(struct json *j, const struct timeline *t, uint64_t requests)
{
    struct server_times cpu;
    const pid_t *pids;
    if (!timeline_server_cpu(t, &cpu)) {
        json_null(j, "server");
        return;
    }
    size_t n = t->given.npids;
    if (t->given.known)
        pids = t->given.pids;
    else
        n = server_cpu_pids(t->server, &pids);
    double total = cpu.user_s + cpu.system_s;
    json_object_begin(j, "server");
    json_array_begin(j, "pids");
    for (size_t i = 0; i < n; i++)
        json_uint(j, NULL, (uint64_t)pids[i]);
    json_array_end(j);
    json_double(j, "user_s", cpu.user_s);
    json_double(j, "system_s", cpu.system_s);
    json_double(j, "cpu_s", cpu_between(0, total));
    if (requests)
        json_double(j, "cpu_us_per_request", total * 1e6 / (double)requests);
    else
        json_null(j, "cpu_us_per_request");
    json_object_end(j);
}

void timeline_json(struct json *j, const struct timeline *t, uint64_t requests)
{
    timeline_summary_json(j, &t->summary, t->spec);
    json_server(j, t, requests);
}
