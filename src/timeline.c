/* Results over time. Interval k covers [k T, (k + 1) T) from the run's
 * start, T being --interval; the last one ends with the run. An interval is
 * written as soon as every worker has delivered it and its end has passed;
 * one delivered early (every worker ended on its own) may be the last, so it
 * waits for the end of the run. Records are flushed one by one, so that a
 * file can be followed while the run goes on.
 * SPDX-License-Identifier: MIT */
#include "timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "interval.h"
#include "json.h"
#include "spec.h"
#include "units.h"
#include "version.h"
#include "xalloc.h"

struct timeline {
    const struct run_spec *spec;
    struct intervals *intervals;
    struct ev_loop *loop;
    ev_async ready;
    uint64_t start; /* clock_us */
    struct timespec started;
    int64_t origin_us; /* when interval 0 starts, Unix time in us */
    FILE *out;         /* --timeline */
    bool csv;
    FILE *hlog;         /* --hdr-log */
    const char *failed; /* the first file a write to failed, reported after the report */
    int failed_errno;
    struct server_cpu *server;
    struct server_times server_start, server_last;
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
    uint64_t count; /* intervals written */
    struct {
        uint64_t n;
        double min, max, sum, sum_sq;
    } rps; /* over the intervals of full length */
    struct {
        uint64_t n, min, max;
    } p99; /* over the intervals with responses */
    struct {
        bool known, has_p99;
        double rate;
        uint64_t p99;
    } last;
};

/* One interval as written. */
struct record {
    uint64_t index, start_us, length_us;
    const struct stats *s;
    double server_s; /* CPU time of the server in it; NaN without --server-pid */
    char *latency;   /* s->latency encoded, once for both files; or NULL */
};

/* "-": the records take stdout to themselves and descriptor 1 becomes
 * stderr, so the text report goes there, as with --json -. */
static FILE *open_output(const char *path)
{
    FILE *f;
    if (strcmp(path, "-") != 0) {
        if (!(f = fopen(path, "w")))
            die("cannot open %s: %s", path, strerror(errno));
        return f;
    }
    int fd = dup(STDOUT_FILENO);
    if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0 || !(f = fdopen(fd, "w")))
        die("cannot write to stdout: %s", strerror(errno));
    return f;
}

static bool is_csv(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && strcasecmp(path + n - 4, ".csv") == 0;
}

struct timeline *timeline_new(const struct run_spec *spec, char *const *server_pids,
                              size_t nserver_pids)
{
    struct timeline *t = xcalloc(1, sizeof *t);
    t->spec = spec;
    if (spec->timeline) {
        t->out = open_output(spec->timeline);
        t->csv = is_csv(spec->timeline);
    }
    if (spec->hdr_log)
        t->hlog = open_output(spec->hdr_log);
    if (nserver_pids)
        t->server = server_cpu_open(server_pids, nserver_pids);
    return t;
}

void timeline_free(struct timeline *t)
{
    if (!t)
        return;
    intervals_free(t->intervals);
    server_cpu_free(t->server);
    free(t->given.pids);
    free(t);
}

/* ---- writing ------------------------------------------------------------ */

static void check(struct timeline *t, FILE *f, const char *path)
{
    if ((fflush(f) != 0 || ferror(f)) && !t->failed) {
        t->failed = path;
        t->failed_errno = errno;
    }
}

static uint64_t status_class(const struct stats *s, int hundreds)
{
    uint64_t n = 0;
    for (int code = 100 * hundreds; code < 100 * (hundreds + 1); code++)
        n += s->status[code];
    return n;
}

static const char *const class_names[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

/* Responses with a status outside 100..599. */
static uint64_t status_other(const struct stats *s)
{
    uint64_t n = s->requests;
    for (int c = 1; c <= 5; c++)
        n -= status_class(s, c);
    return n;
}

static double per_sec(uint64_t n, uint64_t us) { return us ? (double)n * 1e6 / (double)us : 0; }

/* The run's start to the microsecond, as --json's start_time_us: with the
 * shard, what volley merge finds a timeline's result by. */
static uint64_t start_time_us(const struct timeline *t)
{
    return (uint64_t)t->started.tv_sec * 1000000 + (uint64_t)t->started.tv_nsec / 1000;
}

/* The run's parameters, as the first line of a JSON Lines timeline. */
static void json_run(struct timeline *t)
{
    const struct run_spec *spec = t->spec;
    char date[UNITS_BUF];
    struct json j;
    json_init_line(&j, t->out);
    json_object_begin(&j, NULL);
    json_string(&j, "type", "run");
    json_string(&j, "volley", VOLLEY_VERSION);
    json_string(&j, "start_time", units_utc_time(&t->started, date));
    json_uint(&j, "start_time_us", start_time_us(t));
    if (spec->shard.count) {
        json_object_begin(&j, "shard");
        json_uint(&j, "index", spec->shard.index);
        json_uint(&j, "count", spec->shard.count);
        json_object_end(&j);
    } else {
        json_null(&j, "shard");
    }
    json_string(&j, "url", spec->url);
    json_uint(&j, "threads", spec->threads);
    json_uint(&j, "connections", spec->connections);
    json_uint_or_null(&j, "duration_us", spec->time_limit_us);
    json_uint_or_null(&j, "requests", spec->requests);
    json_uint_or_null(&j, "rate", spec->rate);
    json_string(&j, "script", spec->script);
    json_uint(&j, "interval_us", spec->interval_us);
    json_uint(&j, "intervals_start_us", (uint64_t)t->origin_us);
    json_object_end(&j);
    json_finish(&j);
}

/* A latency's figures and its histogram (encoded: h's encoding, or NULL). */
static void json_latency(struct json *j, const char *key, const struct hist *h, const char *encoded)
{
    uint64_t n = hist_count(h);
    json_object_begin(j, key);
    json_uint(j, "count", n);
    if (n) {
        json_double(j, "mean", hist_mean(h));
        json_uint(j, "p50", hist_value_at_percentile(h, 50));
        json_uint(j, "p90", hist_value_at_percentile(h, 90));
        json_uint(j, "p99", hist_value_at_percentile(h, 99));
        json_uint(j, "max", hist_max(h));
    } else {
        json_null(j, "mean");
        json_null(j, "p50");
        json_null(j, "p90");
        json_null(j, "p99");
        json_null(j, "max");
    }
    char *own = encoded ? NULL : hist_encode(h);
    json_string(j, "hdr_histogram", encoded ? encoded : own);
    free(own);
    json_object_end(j);
}

static void json_record(struct timeline *t, const struct record *r)
{
    const struct stats *s = r->s;
    const struct errors *e = &s->errors;
    struct json j;
    json_init_line(&j, t->out);
    json_object_begin(&j, NULL);
    json_string(&j, "type", "interval");
    json_uint(&j, "interval", r->index);
    json_uint(&j, "start_us", r->start_us);
    json_uint(&j, "length_us", r->length_us);
    json_bool(&j, "short", r->length_us < t->spec->interval_us);
    json_uint(&j, "requests", s->requests);
    json_double(&j, "requests_per_sec", per_sec(s->requests, r->length_us));
    json_uint(&j, "bytes", s->bytes);
    json_object_begin(&j, "status");
    for (int c = 1; c <= 5; c++)
        json_uint(&j, class_names[c - 1], status_class(s, c));
    json_uint(&j, "other", status_other(s));
    json_object_end(&j);
    json_object_begin(&j, "errors");
    json_uint(&j, "connect", e->connect);
    json_uint(&j, "read", e->read);
    json_uint(&j, "write", e->write);
    json_uint(&j, "timeout", e->timeout);
    json_uint(&j, "status", e->status);
    json_object_end(&j);
    json_uint(&j, "connects", s->connects);
    json_uint(&j, "reconnects", s->reconnects);
    json_latency(&j, "latency", s->latency, r->latency);
    if (t->spec->rate) {
        json_double(&j, "sent_per_sec", per_sec(s->sent, r->length_us));
        json_latency(&j, "latency_uncorrected", s->u_latency, NULL);
    } else {
        json_null(&j, "sent_per_sec");
        json_null(&j, "latency_uncorrected");
    }
    json_double(&j, "server_cpu_s", r->server_s); /* NaN is written as null */
    json_object_end(&j);
    json_finish(&j);
}

/* The run's parameters as key=value pairs on a comment line, the URL last
 * (it may hold anything); then the header row. */
static void csv_header(struct timeline *t)
{
    const struct run_spec *spec = t->spec;
    char date[UNITS_BUF];
    FILE *f = t->out;
    fprintf(f,
            "# volley %s timeline: start_time=%s start_time_us=%" PRIu64 " shard=", VOLLEY_VERSION,
            units_utc_time(&t->started, date), start_time_us(t));
    if (spec->shard.count)
        fprintf(f, "%" PRIu64 "/%" PRIu64, spec->shard.index, spec->shard.count);
    fprintf(f, " threads=%" PRIu64 " connections=%" PRIu64, spec->threads, spec->connections);
    fprintf(f, " duration_us=");
    if (spec->time_limit_us)
        fprintf(f, "%" PRIu64, spec->time_limit_us);
    fprintf(f, " requests=");
    if (spec->requests)
        fprintf(f, "%" PRIu64, spec->requests);
    fprintf(f, " rate=");
    if (spec->rate)
        fprintf(f, "%" PRIu64, spec->rate);
    fprintf(f, " interval_us=%" PRIu64 " intervals_start_us=%" PRId64 " script=%s url=%s\n",
            spec->interval_us, t->origin_us, spec->script ? spec->script : "", spec->url);
    fputs("interval,start_us,length_us,short,requests,requests_per_sec,bytes,"
          "status_1xx,status_2xx,status_3xx,status_4xx,status_5xx,status_other,"
          "errors_connect,errors_read,errors_write,errors_timeout,errors_status,"
          "connects,reconnects,"
          "latency_count,latency_mean,latency_p50,latency_p90,latency_p99,latency_max,"
          "sent_per_sec,latency_uncorrected_count,latency_uncorrected_mean,"
          "latency_uncorrected_p50,latency_uncorrected_p90,latency_uncorrected_p99,"
          "latency_uncorrected_max,server_cpu_s\n",
          f);
}

/* A latency's columns; all empty (as null) when h is NULL. */
static void csv_latency(FILE *f, const struct hist *h)
{
    uint64_t n = h ? hist_count(h) : 0;
    if (!h) {
        fputs(",,,,,,", f);
        return;
    }
    fprintf(f, ",%" PRIu64, n);
    if (n)
        fprintf(f, ",%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, hist_mean(h),
                hist_value_at_percentile(h, 50), hist_value_at_percentile(h, 90),
                hist_value_at_percentile(h, 99), hist_max(h));
    else
        fputs(",,,,,", f);
}

static void csv_record(struct timeline *t, const struct record *r)
{
    const struct stats *s = r->s;
    const struct errors *e = &s->errors;
    FILE *f = t->out;
    fprintf(f, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d,%" PRIu64 ",%.3f,%" PRIu64, r->index,
            r->start_us, r->length_us, r->length_us < t->spec->interval_us, s->requests,
            per_sec(s->requests, r->length_us), s->bytes);
    for (int c = 1; c <= 5; c++)
        fprintf(f, ",%" PRIu64, status_class(s, c));
    fprintf(f, ",%" PRIu64, status_other(s));
    fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, e->connect, e->read,
            e->write, e->timeout, e->status);
    fprintf(f, ",%" PRIu64 ",%" PRIu64, s->connects, s->reconnects);
    csv_latency(f, s->latency);
    if (t->spec->rate)
        fprintf(f, ",%.3f", per_sec(s->sent, r->length_us));
    else
        fputc(',', f);
    csv_latency(f, t->spec->rate ? s->u_latency : NULL);
    if (isnan(r->server_s))
        fputs(",\n", f);
    else
        fprintf(f, ",%.3f\n", r->server_s);
}

/* HdrHistogram's interval log (format 1.3, as its Java HistogramLogWriter
 * writes it): start and base time, then per interval its start relative to
 * the base time and its length in seconds, its largest value in ms (what
 * the tools read in that column) and the histogram, in microseconds. */
static void hlog_header(struct timeline *t)
{
    char date[UNITS_BUF];
    double start = (double)t->started.tv_sec + (double)t->started.tv_nsec / 1e9;
    FILE *f = t->hlog;
    fprintf(f, "#[Histogram log format version 1.3]\n");
    fprintf(f, "#[StartTime: %.3f (seconds since epoch), %s]\n", start,
            units_utc_time(&t->started, date));
    /* the intervals' starts are relative to where they count from */
    fprintf(f, "#[BaseTime: %.3f (seconds since epoch)]\n", (double)t->origin_us / 1e6);
    fprintf(f, "#[volley %s: latency of %s in microseconds; Interval_Max in milliseconds]\n",
            VOLLEY_VERSION, t->spec->url);
    fprintf(f, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
               "\"Interval_Compressed_Histogram\"\n");
}

static void hlog_record(struct timeline *t, const struct record *r)
{
    fprintf(t->hlog, "%.3f,%.3f,%.3f,%s\n", (double)r->start_us / 1e6, (double)r->length_us / 1e6,
            (double)hist_max(r->s->latency) / 1e3, r->latency);
}

/* ---- the intervals ------------------------------------------------------- */

static void remember(struct timeline *t, const struct record *r)
{
    const struct hist *latency = r->s->latency;
    double rate = per_sec(r->s->requests, r->length_us);
    t->count++;
    if (r->length_us >= t->spec->interval_us) {
        t->rps.min = t->rps.n == 0 || rate < t->rps.min ? rate : t->rps.min;
        t->rps.max = t->rps.n == 0 || rate > t->rps.max ? rate : t->rps.max;
        t->rps.sum += rate;
        t->rps.sum_sq += rate * rate;
        t->rps.n++;
    }
    t->last.known = true;
    t->last.rate = rate;
    t->last.has_p99 = hist_count(latency) > 0;
    if (t->last.has_p99) {
        uint64_t p99 = hist_value_at_percentile(latency, 99);
        t->last.p99 = p99;
        t->p99.min = t->p99.n == 0 || p99 < t->p99.min ? p99 : t->p99.min;
        t->p99.max = t->p99.n == 0 || p99 > t->p99.max ? p99 : t->p99.max;
        t->p99.n++;
    }
}

/* A difference of CPU times, which are whole clock ticks, without the
 * rounding noise of the subtraction (0.01, not 0.009999999999999997). */
static double cpu_between(double from, double to) { return round((to - from) * 1e6) / 1e6; }

/* Writes the record to the files and notes it for the summary. */
static void write_record(struct timeline *t, struct record *r)
{
    if ((t->out && !t->csv) || t->hlog)
        r->latency = hist_encode(r->s->latency);
    if (t->out) {
        if (t->csv)
            csv_record(t, r);
        else
            json_record(t, r);
        check(t, t->out, t->spec->timeline);
    }
    if (t->hlog) {
        hlog_record(t, r);
        check(t, t->hlog, t->spec->hdr_log);
    }
    free(r->latency);
    remember(t, r);
}

/* Writes interval index, of length_us, and gives its statistics back; the
 * server's CPU time in it is what it used since the last record. */
static void emit(struct timeline *t, struct stats *s, uint64_t index, uint64_t length_us)
{
    struct record r = {index, index * t->spec->interval_us, length_us, s, NAN, NULL};
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
    struct record r = {index, index * t->spec->interval_us, length_us, s, server_s, NULL};
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

/* The first lines of the files: the run's parameters. */
static void write_headers(struct timeline *t)
{
    if (t->out) {
        if (t->csv)
            csv_header(t);
        else
            json_run(t);
        check(t, t->out, t->spec->timeline);
    }
    if (t->hlog) {
        hlog_header(t);
        check(t, t->hlog, t->spec->hdr_log);
    }
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
    if (t->server) {
        server_cpu_read(t->server, &t->server_start);
        t->server_last = t->server_start;
    }
    write_headers(t);
}

void timeline_start_merged(struct timeline *t, const struct timespec *started, int64_t origin_us)
{
    t->started = *started;
    t->origin_us = origin_us;
    write_headers(t);
}

static void close_output(struct timeline *t, FILE *f, const char *path)
{
    if (f && fclose(f) != 0 && !t->failed) {
        t->failed = path;
        t->failed_errno = errno;
    }
}

void timeline_check(const struct timeline *t)
{
    if (t->failed)
        die("cannot write %s: %s", strcmp(t->failed, "-") == 0 ? "to stdout" : t->failed,
            strerror(t->failed_errno));
}

void timeline_close(struct timeline *t)
{
    close_output(t, t->out, t->spec->timeline);
    close_output(t, t->hlog, t->spec->hdr_log);
    t->out = t->hlog = NULL;
}

void timeline_finish(struct timeline *t, uint64_t runtime_us)
{
    ev_async_stop(t->loop, &t->ready);
    drain(t);
    if (t->held) {
        uint64_t start = t->held_index * t->spec->interval_us;
        emit(t, t->held, t->held_index, runtime_us > start ? runtime_us - start : 0);
        t->held = NULL;
    }
    timeline_close(t);
}

bool timeline_last(const struct timeline *t, double *rate, uint64_t *p99, bool *has_p99)
{
    *rate = t->last.rate;
    *p99 = t->last.p99;
    *has_p99 = t->last.has_p99;
    return t->last.known;
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

static void json_intervals(struct json *j, const struct timeline *t)
{
    const struct run_spec *spec = t->spec;
    /* volley merge of results without their timelines: no intervals known */
    if (!spec->interval_us) {
        json_null(j, "intervals");
        return;
    }
    json_object_begin(j, "intervals");
    json_uint(j, "interval_us", spec->interval_us);
    json_uint(j, "count", t->count);
    json_string(j, "timeline", spec->timeline);
    json_string(j, "hdr_log", spec->hdr_log);
    json_object_begin(j, "requests_per_sec");
    json_uint(j, "count", t->rps.n);
    if (t->rps.n) {
        double n = (double)t->rps.n, mean = t->rps.sum / n;
        double var = t->rps.n > 1 ? (t->rps.sum_sq - n * mean * mean) / (n - 1) : 0;
        json_double(j, "min", t->rps.min);
        json_double(j, "max", t->rps.max);
        json_double(j, "mean", mean);
        json_double(j, "stdev", var > 0 ? sqrt(var) : 0);
    } else {
        json_null(j, "min");
        json_null(j, "max");
        json_null(j, "mean");
        json_null(j, "stdev");
    }
    json_object_end(j);
    json_object_begin(j, "latency_p99");
    if (t->p99.n) {
        json_uint(j, "min", t->p99.min);
        json_uint(j, "max", t->p99.max);
    } else {
        json_null(j, "min");
        json_null(j, "max");
    }
    json_object_end(j);
    json_object_end(j);
}

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
    json_intervals(j, t);
    json_server(j, t, requests);
}
