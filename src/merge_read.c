/* Reading volley merge's inputs: each file a --json result (one JSON
 * document) or a --timeline in JSON Lines (its first line a run record),
 * every figure checked, so that a file that is not what volley writes is
 * refused with one line instead of being added up.
 * SPDX-License-Identifier: MIT */
#include "merge_read.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "units.h"
#include "url.h"
#include "xalloc.h"

/* volley's results are a few hundred KB at most. */
#define MERGE_MAX_FILE (64u << 20)
/* A timeline's line holds two histograms, about 1 MB at the very most. */
#define MERGE_MAX_LINE (16u << 20)
/* Far more machines than anyone runs a load from, and CPUs than one has. */
#define MERGE_MAX_SHARDS 100000
#define MERGE_MAX_CPUS (1u << 20)

void merge_bad(const char *file, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "volley: %s: ", file);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- reading JSON ---------------------------------------------------------- */

/* The member at a dotted path ("rate.sent"), or NULL where any step is missing. */
static const struct jdoc *at(const struct jdoc *v, const char *path)
{
    char key[64];
    while (v && *path) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        v = jdoc_get(v, key);
        path += n + (path[n] == '.');
    }
    return v;
}

static bool is_null(const struct jdoc *v) { return v && v->type == JDOC_NULL; }

static uint64_t need_u64(const char *file, const struct jdoc *in, const char *path)
{
    uint64_t v;
    if (!jdoc_u64(at(in, path), &v))
        merge_bad(file, "%s: missing, or not a count", path);
    return v;
}

static double need_number(const char *file, const struct jdoc *in, const char *path)
{
    double v;
    if (!jdoc_double(at(in, path), &v) || v < 0)
        merge_bad(file, "%s: missing, or not a number >= 0", path);
    return v;
}

static const char *need_string(const char *file, const struct jdoc *in, const char *path)
{
    const char *s = jdoc_string(at(in, path));
    if (!s)
        merge_bad(file, "%s: missing, or not a string", path);
    return s;
}

static const struct jdoc *need_object(const char *file, const struct jdoc *in, const char *path,
                                      bool nullable)
{
    const struct jdoc *v = at(in, path);
    if (nullable && is_null(v))
        return NULL;
    if (!v || v->type != JDOC_OBJECT)
        merge_bad(file, "%s: missing, or not an object", path);
    return v;
}

/* A count the document gives as a rate or a mean (path): that times the
 * time or the samples, n here. */
static uint64_t count_of(const char *file, const char *path, double n)
{
    if (!(n < 0x1p63))
        merge_bad(file, "%s: out of range", path);
    return (uint64_t)llround(n);
}

/* ---- reading a result ------------------------------------------------------ */

/* name.key, the path of a distribution's member, in buf. */
static const char *member(char buf[80], const char *name, const char *key)
{
    snprintf(buf, 80, "%s.%s", name, key);
    return buf;
}

/* The distribution at name (an object of the document's top level): its
 * histogram with the exact figures the document gives beside it, added
 * into dst (whose layout it must have). */
static void distribution(struct part *p, const char *name, struct hist *dst)
{
    char path[80], m[80];
    const char *why;
    const struct jdoc *doc = p->doc;
    need_object(p->file, doc, name, false);
    member(path, name, "hdr_histogram");
    uint64_t count = need_u64(p->file, doc, member(m, name, "count")), min = 0, max = 0;
    double mean = 0, stdev = 0;
    if (count) {
        min = need_u64(p->file, doc, member(m, name, "min"));
        max = need_u64(p->file, doc, member(m, name, "max"));
        mean = need_number(p->file, doc, member(m, name, "mean"));
        stdev = need_number(p->file, doc, member(m, name, "stdev"));
    }
    struct hist *h = hist_decode(need_string(p->file, doc, path), &why);
    if (!h)
        merge_bad(p->file, "%s: %s", path, why);
    uint64_t highest = hist_highest(h), held = hist_count(h);
    bool fits = highest == hist_highest(dst) && held == count &&
                (!count || hist_set_summary(h, min, max, mean, stdev));
    if (fits)
        hist_merge(dst, h);
    /* freed before saying why: exit 1 leaves nothing behind */
    hist_free(h);
    if (highest != hist_highest(dst))
        merge_bad(p->file,
                  "%s: tracks values up to %" PRIu64 ", not up to %" PRIu64 " as volley does", path,
                  highest, hist_highest(dst));
    if (held != count)
        merge_bad(p->file, "%s: holds %" PRIu64 " samples, but %s.count says %" PRIu64, path, held,
                  name, count);
    if (!fits)
        merge_bad(p->file, "%s: min, max, mean and stdev do not fit its histogram", name);
}

static void read_distributions(struct part *p)
{
    const struct jdoc *doc = p->doc;
    struct stats *s = &p->stats;
    distribution(p, "latency", s->latency);
    distribution(p, "requests_per_sec", s->rps);
    distribution(p, "connect_time", s->connect);
    if (p->open_model) {
        distribution(p, "latency_uncorrected", s->u_latency);
        distribution(p, "scheduling_lag", s->lag);
    } else {
        /* the closed model has none: null, or an object */
        need_object(p->file, doc, "latency_uncorrected", true);
        need_object(p->file, doc, "scheduling_lag", true);
    }
    if (hist_count(s->latency) != s->requests)
        merge_bad(p->file, "latency.count is %" PRIu64 ", not requests (%" PRIu64 ")",
                  hist_count(s->latency), s->requests);
}

/* "200": 12 ... and "other": n; they add up to requests. */
static void read_status_codes(struct part *p)
{
    const struct jdoc *codes = need_object(p->file, p->doc, "status_codes", false);
    uint64_t total = 0;
    for (size_t i = 0; i < codes->len; i++) {
        const struct jdoc_member *m = &codes->u.members[i];
        uint64_t code = 0, n;
        char *end;
        if (strcmp(m->key, "other") != 0) {
            code = strtoull(m->key, &end, 10);
            if (*end || m->key[0] < '1' || m->key[0] > '9' || code >= STATS_STATUS_MAX)
                merge_bad(p->file, "status_codes: \"%s\" is not a status code", m->key);
        }
        if (!jdoc_u64(&m->value, &n) || total + n < total)
            merge_bad(p->file, "status_codes.%s: not a count", m->key);
        p->stats.status[code] = n;
        total += n;
    }
    if (total != p->stats.requests)
        merge_bad(p->file, "status_codes add up to %" PRIu64 ", not to requests (%" PRIu64 ")",
                  total, p->stats.requests);
}

/* The error classes, and their causes, which add up to them. */
static void read_errors(struct part *p)
{
    struct errors *e = &p->stats.errors;
    const struct jdoc *errors = need_object(p->file, p->doc, "errors", false);
    const struct jdoc *causes = need_object(p->file, p->doc, "error_causes", false);
    e->connect = need_u64(p->file, errors, "connect");
    e->read = need_u64(p->file, errors, "read");
    e->write = need_u64(p->file, errors, "write");
    e->timeout = need_u64(p->file, errors, "timeout");
    e->status = need_u64(p->file, errors, "status");
    unsigned __int128 causes_total = 0;
    for (int c = 0; c < CAUSE_COUNT; c++) {
        p->stats.causes[c] = need_u64(p->file, causes, stats_cause_name(c));
        causes_total += p->stats.causes[c];
    }
    if (causes_total != (unsigned __int128)e->connect + e->read + e->write + e->timeout)
        merge_bad(p->file, "error_causes do not add up to the socket errors");
    if (causes_total > UINT64_MAX)
        merge_bad(p->file, "errors: more than 2^64");
}

/* volley's own CPU time, and how busy its busiest thread was. */
static void read_cpu(struct part *p)
{
    const struct jdoc *cpu = need_object(p->file, p->doc, "cpu", false);
    p->cpu.user_s = need_number(p->file, cpu, "user_s");
    p->cpu.system_s = need_number(p->file, cpu, "system_s");
    p->cpu.busiest = need_number(p->file, cpu, "busiest_thread");
    p->cpu.cpus = need_u64(p->file, cpu, "cpus");
    /* the parts' add up in a long */
    if (p->cpu.cpus == 0 || p->cpu.cpus > MERGE_MAX_CPUS)
        merge_bad(p->file, "cpu.cpus: %" PRIu64 " is not a number of CPUs", p->cpu.cpus);
    p->cpu.has_wait = !is_null(jdoc_get(cpu, "run_queue_wait_s"));
    if (p->cpu.has_wait)
        p->cpu.wait_s = need_number(p->file, cpu, "run_queue_wait_s");
}

/* What an HTTP/2 run saw of the protocol: null or absent for HTTP/1.1. */
static void read_http2(struct part *p)
{
    const struct jdoc *h2 = need_object(p->file, p->doc, "http2", true), *codes;
    struct h2_stats *s = &p->stats.h2;
    if (!h2 || !p->spec.http2)
        return;
    s->goaways = need_u64(p->file, h2, "goaway_received");
    s->refused = need_u64(p->file, h2, "refused");
    if (!is_null(jdoc_get(h2, "streams"))) {
        s->streams = need_u64(p->file, h2, "streams");
        s->settings = 1;
    }
    codes = need_object(p->file, h2, "rst_stream_received", false);
    for (size_t i = 0; i < codes->len; i++) {
        const struct jdoc_member *m = &codes->u.members[i];
        unsigned code = 0;
        while (code < STATS_H2_CODES && strcmp(stats_h2_code_name(code), m->key) != 0)
            code++;
        if (code == STATS_H2_CODES || !jdoc_u64(&m->value, &s->resets[code]))
            merge_bad(p->file, "http2.rst_stream_received.%s: not an error code's count", m->key);
    }
}

/* Counters, and what the text report needs that no counter holds. */
static void read_totals(struct part *p)
{
    const struct jdoc *doc = p->doc;
    struct stats *s = &p->stats;
    s->requests = need_u64(p->file, doc, "requests");
    s->bytes = need_u64(p->file, doc, "bytes");
    s->connects = need_u64(p->file, doc, "connects");
    s->reopened = need_u64(p->file, doc, "reopened");
    s->reconnects = need_u64(p->file, doc, "reconnects");
    if (s->reopened > s->connects)
        merge_bad(p->file, "reopened: %" PRIu64 " of %" PRIu64 " connects", s->reopened,
                  s->connects);
    p->duration_us = need_u64(p->file, doc, "duration_us");
    if (!p->duration_us && (s->requests || s->bytes))
        merge_bad(p->file, "duration_us: 0 for %" PRIu64 " responses", s->requests);
    const struct jdoc *tls = need_object(p->file, doc, "tls", true);
    if (tls) {
        s->handshakes = need_u64(p->file, tls, "handshakes");
        s->resumed = need_u64(p->file, tls, "resumed");
        if (s->handshakes)
            s->handshake_us =
                count_of(p->file, "tls.handshake_mean_us",
                         need_number(p->file, tls, "handshake_mean_us") * (double)s->handshakes);
    }
    read_http2(p);
    /* sent is written as a rate over the run; the count is that times its length */
    const struct jdoc *rate = need_object(p->file, doc, "rate", !p->open_model);
    if (rate)
        s->sent = count_of(p->file, "rate.sent",
                           need_number(p->file, rate, "sent") * (double)p->duration_us / 1e6);
    read_cpu(p);
}

/* When the part started: start_time_us, or for a result written before it
 * existed, start_time to the millisecond. */
static void read_start(struct part *p)
{
    const struct jdoc *us = jdoc_get(p->doc, "start_time_us");
    uint64_t v;
    if (us) {
        if (!jdoc_u64(us, &v) || v > INT64_MAX)
            merge_bad(p->file, "start_time_us: not a time");
        p->start_us = (int64_t)v;
    } else if (!units_parse_instant(need_string(p->file, p->doc, "start_time"), &p->start_us)) {
        merge_bad(p->file, "start_time: not an RFC 3339 time");
    }
}

/* An optional member of options: absent (in results of earlier versions)
 * or null is 0. */
static uint64_t optional_u64(const char *file, const struct jdoc *o, const char *key)
{
    const struct jdoc *v = jdoc_get(o, key);
    return !v || is_null(v) ? 0 : need_u64(file, o, key);
}

/* An optional string of options: absent or null is NULL; a copy otherwise. */
static char *optional_string(const char *file, const struct jdoc *o, const char *key)
{
    const struct jdoc *v = jdoc_get(o, key);
    return !v || is_null(v) ? NULL : xstrdup(need_string(file, o, key));
}

/* The lists of options: --stages, the script's arguments, -H. Results of
 * earlier versions may lack them. */
static void read_option_lists(struct part *p, const struct jdoc *o)
{
    struct run_spec *spec = &p->spec;
    const struct jdoc *list;
    if ((list = jdoc_get(o, "stages")) && list->type == JDOC_ARRAY) {
        spec->stages = xcalloc(list->len + 1, sizeof *spec->stages);
        for (size_t i = 0; i < list->len; i++) {
            const struct jdoc *st = &list->u.items[i];
            spec->stages[spec->nstages++] =
                (struct stage){need_u64(p->file, st, "duration_us"), need_u64(p->file, st, "rate")};
        }
        spec->stages_from = optional_u64(p->file, o, "stages_from");
    }
    if ((list = jdoc_get(o, "script_args")) && list->type == JDOC_ARRAY) {
        spec->script_args = xcalloc(list->len + 1, sizeof *spec->script_args);
        for (size_t i = 0; i < list->len; i++)
            if (jdoc_string(&list->u.items[i]))
                spec->script_args[spec->nscript_args++] = xstrdup(list->u.items[i].u.text);
    }
    if ((list = jdoc_get(o, "headers")) && list->type == JDOC_ARRAY) {
        spec->headers = xcalloc(list->len + 1, sizeof *spec->headers);
        for (size_t i = 0; i < list->len; i++) {
            const struct jdoc *h = &list->u.items[i];
            if (h->type == JDOC_ARRAY && h->len == 2 && jdoc_string(&h->u.items[0]) &&
                jdoc_string(&h->u.items[1]))
                spec->headers[spec->nheaders++] =
                    (struct header){xstrdup(h->u.items[0].u.text), xstrdup(h->u.items[1].u.text)};
        }
    }
}

/* This part's share of the run: the shard it was, or the whole run. */
static void read_shard(struct part *p)
{
    struct run_spec *spec = &p->spec;
    struct shard *s = &spec->shard;
    const struct jdoc *sh = need_object(p->file, p->doc, "shard", true);
    if (!sh) {
        *s = (struct shard){.connections = spec->connections,
                            .requests = spec->requests,
                            .rate = (double)spec->rate};
        return;
    }
    s->index = need_u64(p->file, sh, "index");
    s->count = need_u64(p->file, sh, "count");
    if (s->index >= s->count)
        merge_bad(p->file, "shard.index: %" PRIu64 " of %" PRIu64 " shards", s->index, s->count);
    if (s->count > MERGE_MAX_SHARDS)
        merge_bad(p->file, "shard.count: more than %d shards", MERGE_MAX_SHARDS);
    s->connections = need_u64(p->file, sh, "connections");
    s->rate = p->open_model ? need_number(p->file, sh, "rate") : 0;
    s->requests = p->counted ? need_u64(p->file, sh, "requests") : 0;
}

/* What was asked for, and this part's share of it. */
static void read_options(struct part *p)
{
    const struct jdoc *o = p->options = need_object(p->file, p->doc, "options", false);
    struct run_spec *spec = &p->spec;
    struct url url;
    const char *why;
    spec->url = xstrdup(need_string(p->file, o, "url"));
    if (!url_parse(spec->url, &url, &why))
        merge_bad(p->file, "options.url: %s", why);
    spec->tls = url.tls;
    url_free(&url);
    spec->threads = need_u64(p->file, o, "threads");
    spec->connections = need_u64(p->file, o, "connections");
    p->open_model = !is_null(jdoc_get(o, "rate"));
    p->counted = !is_null(jdoc_get(o, "requests"));
    /* results written before HTTP/2 have no protocol: HTTP/1.1 */
    const char *protocol = jdoc_string(jdoc_get(o, "protocol"));
    spec->http2 = protocol && strcmp(protocol, "HTTP/2") == 0;
    spec->streams = jdoc_get(o, "streams") ? need_u64(p->file, o, "streams") : 1;
    spec->rate = p->open_model ? need_u64(p->file, o, "rate") : 0;
    spec->requests = p->counted ? need_u64(p->file, o, "requests") : 0;
    /* null: no time limit (-n without -d, or -d 0) */
    const struct jdoc *limit = jdoc_get(o, "duration_us");
    spec->duration_us = spec->time_limit_us =
        is_null(limit) ? 0 : need_u64(p->file, o, "duration_us");
    spec->timeout_us = need_u64(p->file, o, "timeout_us");
    spec->ramp_up_us = optional_u64(p->file, o, "ramp_up_us");
    spec->warmup_us = optional_u64(p->file, o, "warmup_us");
    const struct jdoc *keepalive = jdoc_get(o, "keepalive");
    spec->no_keepalive = keepalive && keepalive->type == JDOC_FALSE;
    spec->unix_socket = optional_string(p->file, o, "unix_socket");
    spec->script = optional_string(p->file, o, "script");
    read_option_lists(p, o);
    p->pipeline = need_u64(p->file, o, "pipeline");
    read_shard(p);
}

/* --server-pid: the processes measured and their CPU time; null without. */
static void read_server(struct part *p)
{
    const struct jdoc *server = need_object(p->file, p->doc, "server", true);
    if (!server)
        return;
    const struct jdoc *pids = jdoc_get(server, "pids");
    if (!pids || pids->type != JDOC_ARRAY || pids->len == 0)
        merge_bad(p->file, "server.pids: missing, or not a list of processes");
    p->server.pids = xcalloc(pids->len, sizeof *p->server.pids);
    for (size_t i = 0; i < pids->len; i++) {
        uint64_t pid;
        if (!jdoc_u64(&pids->u.items[i], &pid) || pid == 0 || pid > INT32_MAX)
            merge_bad(p->file, "server.pids: not a list of process IDs");
        p->server.pids[p->server.npids++] = (pid_t)pid;
    }
    p->server.user_s = need_number(p->file, server, "user_s");
    p->server.system_s = need_number(p->file, server, "system_s");
    p->server.known = true;
}

static void read_part(struct part *p, const char *file, const struct buf *text)
{
    char err[160];
    p->file = file;
    p->doc = jdoc_parse(text->data, text->len, err, sizeof err);
    if (!p->doc)
        merge_bad(file, "%s", err);
    if (p->doc->type != JDOC_OBJECT)
        merge_bad(file, "not a volley result (not a JSON object)");
    uint64_t version = need_u64(file, p->doc, "schema_version");
    if (version != 1)
        merge_bad(file, "schema version %" PRIu64 "; this volley reads version 1", version);
    stats_init(&p->stats);
    read_options(p);
    read_start(p);
    read_totals(p);
    /* ends are start + duration: keep them far from overflowing */
    if (p->start_us > INT64_MAX / 2 || p->duration_us > (uint64_t)INT64_MAX / 2)
        merge_bad(file, "start_time_us or duration_us out of range");
    read_errors(p);
    read_status_codes(p);
    read_distributions(p);
    read_server(p);
    const struct jdoc *intervals = need_object(file, p->doc, "intervals", true);
    p->interval_us = intervals ? need_u64(file, intervals, "interval_us") : 0;
}

/* ---- reading a timeline ---------------------------------------------------- */

/* The run line: what run the timeline is of. */
static void read_run_line(struct series *s, const struct jdoc *run)
{
    const char *file = s->file;
    s->url = xstrdup(need_string(file, run, "url"));
    uint64_t start = need_u64(file, run, "start_time_us");
    if (start > INT64_MAX / 2)
        merge_bad(file, "start_time_us: out of range");
    s->start_us = (int64_t)start;
    uint64_t origin = need_u64(file, run, "intervals_start_us");
    if (origin > INT64_MAX / 2)
        merge_bad(file, "intervals_start_us: out of range");
    s->origin_us = (int64_t)origin;
    s->interval_us = need_u64(file, run, "interval_us");
    /* intervals are at least 10ms; a longer one than 2^61 us is no run's */
    if (s->interval_us < SPEC_INTERVAL_MIN_US || s->interval_us > INT64_MAX / 4)
        merge_bad(file, "interval_us: %" PRIu64 " is not an interval of volley's", s->interval_us);
    const struct jdoc *rate = jdoc_get(run, "rate");
    if (!rate || (!is_null(rate) && rate->type != JDOC_NUMBER))
        merge_bad(file, "rate: missing, or not a number or null");
    s->open_model = !is_null(rate);
    const struct jdoc *shard = need_object(file, run, "shard", true);
    if (shard) {
        s->shard.index = need_u64(file, shard, "index");
        s->shard.count = need_u64(file, shard, "count");
        if (s->shard.index >= s->shard.count)
            merge_bad(file, "shard.index: %" PRIu64 " of %" PRIu64 " shards", s->shard.index,
                      s->shard.count);
    }
}

/* An interval's latency (latency or latency_uncorrected, where names it). */
static void read_slice_latency(const char *where, const struct jdoc *v, struct slice_latency *l)
{
    l->count = need_u64(where, v, "count");
    if (l->count) {
        l->mean = need_number(where, v, "mean");
        l->max = need_u64(where, v, "max");
    }
    l->hdr = xstrdup(need_string(where, v, "hdr_histogram"));
}

/* The histogram of an interval's latency with the exact mean and maximum
 * its record gives beside it (it has no minimum or deviation, and the
 * merged record writes neither). */
struct hist *merge_read_latency(const char *where, const struct slice_latency *l)
{
    const char *why;
    struct hist *h = hist_decode(l->hdr, &why);
    if (!h)
        merge_bad(where, "hdr_histogram: %s", why);
    uint64_t highest = hist_highest(h), count = hist_count(h);
    /* freed before saying why: exit 1 leaves nothing behind */
    if (highest != STATS_LATENCY_MAX || count != l->count ||
        (count && !hist_set_summary(h, hist_min(h), l->max, l->mean, 0))) {
        hist_free(h);
        if (highest != STATS_LATENCY_MAX)
            merge_bad(where,
                      "hdr_histogram: tracks values up to %" PRIu64 ", not up to %llu as volley "
                      "does",
                      highest, STATS_LATENCY_MAX);
        if (count != l->count)
            merge_bad(where, "hdr_histogram: holds %" PRIu64 " samples, but count says %" PRIu64,
                      count, l->count);
        merge_bad(where, "mean and max do not fit its histogram");
    }
    return h;
}

static void check_slice_latency(const char *where, const struct jdoc *record, const char *name,
                                struct slice_latency *l)
{
    char *at_name = xasprintf("%s: %s", where, name);
    read_slice_latency(at_name, need_object(where, record, name, false), l);
    hist_free(merge_read_latency(at_name, l));
    free(at_name);
}

static void read_slice_counts(const char *where, const struct jdoc *record, struct slice *sl)
{
    static const char *const classes[6] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
    sl->requests = need_u64(where, record, "requests");
    sl->bytes = need_u64(where, record, "bytes");
    sl->connects = need_u64(where, record, "connects");
    sl->reconnects = need_u64(where, record, "reconnects");
    const struct jdoc *status = need_object(where, record, "status", false);
    unsigned __int128 responses = 0;
    for (int c = 0; c < 6; c++)
        responses += sl->status[c] = need_u64(where, status, classes[c]);
    if (responses != sl->requests)
        merge_bad(where, "status classes do not add up to requests (%" PRIu64 ")", sl->requests);
    const struct jdoc *errors = need_object(where, record, "errors", false);
    sl->errors.connect = need_u64(where, errors, "connect");
    sl->errors.read = need_u64(where, errors, "read");
    sl->errors.write = need_u64(where, errors, "write");
    sl->errors.timeout = need_u64(where, errors, "timeout");
    sl->errors.status = need_u64(where, errors, "status");
}

/* Interval index of the series, the record on its line. */
static void read_slice(struct series *s, const char *where, const struct jdoc *record,
                       struct slice *sl)
{
    uint64_t index = s->n;
    const char *type = need_string(where, record, "type");
    if (strcmp(type, "interval") != 0)
        merge_bad(where, "type: \"%s\", not \"interval\"", type);
    if (need_u64(where, record, "interval") != index)
        merge_bad(where, "interval: not %" PRIu64 ": the intervals are numbered in order from 0",
                  index);
    /* ends are start + length: keep them far from overflowing */
    uint64_t start = need_u64(where, record, "start_us");
    sl->length_us = need_u64(where, record, "length_us");
    if (index > INT64_MAX / 4 / s->interval_us || sl->length_us > INT64_MAX / 4)
        merge_bad(where, "start_us or length_us out of range");
    if (start != index * s->interval_us)
        merge_bad(where, "start_us: not the start of interval %" PRIu64, index);
    read_slice_counts(where, record, sl);
    check_slice_latency(where, record, "latency", &sl->latency);
    if (sl->latency.count != sl->requests)
        merge_bad(where, "latency.count is %" PRIu64 ", not requests (%" PRIu64 ")",
                  sl->latency.count, sl->requests);
    if (s->open_model) {
        check_slice_latency(where, record, "latency_uncorrected", &sl->uncorrected);
        sl->sent =
            count_of(where, "sent_per_sec",
                     need_number(where, record, "sent_per_sec") * (double)sl->length_us / 1e6);
    }
    const struct jdoc *server = jdoc_get(record, "server_cpu_s");
    sl->server_s = NAN;
    if (!server || (!is_null(server) && (!jdoc_double(server, &sl->server_s) || sl->server_s < 0)))
        merge_bad(where, "server_cpu_s: missing, or not a number >= 0 or null");
}

/* The next line of f, without its newline; false at the end of the file. */
static bool next_line(FILE *f, const char *file, struct buf *line)
{
    int c;
    buf_clear(line);
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (line->len == MERGE_MAX_LINE)
            merge_bad(file, "a line longer than %u MiB: not a volley result or timeline",
                      MERGE_MAX_LINE >> 20);
        buf_reserve(line, 1);
        line->data[line->len++] = (char)c;
    }
    if (ferror(f))
        die("cannot read %s: %s", file, strerror(errno));
    return c != EOF || line->len;
}

/* The intervals, one a line, after the run line. */
static void read_series(struct series *s, const char *file, const struct jdoc *run, FILE *f)
{
    struct buf line = {0};
    char err[160];
    s->file = file;
    read_run_line(s, run);
    for (size_t n = 2; next_line(f, file, &line); n++) {
        char *where = xasprintf("%s: line %zu", file, n);
        struct jdoc *record = jdoc_parse(line.data, line.len, err, sizeof err);
        /* "line 1, column 9: ..." of the line alone is of line n in the file */
        if (!record)
            merge_bad(file, "line %zu, %s", n, strncmp(err, "line 1, ", 8) == 0 ? err + 8 : err);
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 64;
            s->slices = xrealloc(s->slices, s->cap * sizeof *s->slices);
        }
        memset(&s->slices[s->n], 0, sizeof s->slices[s->n]);
        read_slice(s, where, record, &s->slices[s->n]);
        s->n++;
        jdoc_free(record);
        free(where);
    }
    buf_free(&line);
}

/* ---- telling them apart ------------------------------------------------------ */

static bool starts_with(const struct buf *b, const char *prefix)
{
    size_t n = strlen(prefix);
    return b->len >= n && memcmp(b->data, prefix, n) == 0;
}

/* The run line, when the first line is a JSON Lines timeline's; NULL for
 * anything else. Timelines that hold no counts to add are refused. */
static struct jdoc *run_line(const char *file, const struct buf *first)
{
    char err[160];
    const char *type;
    if (starts_with(first, "#[Histogram log format"))
        merge_bad(file,
                  "an HdrHistogram log holds only latencies: merge the parts' --timeline files "
                  "(JSON Lines)");
    if (starts_with(first, "# volley "))
        merge_bad(file, "a CSV timeline holds no histograms: merge the parts' JSON Lines timelines "
                        "(--timeline FILE, not FILE.csv)");
    struct jdoc *v = jdoc_parse(first->data, first->len, err, sizeof err);
    if (v && (type = jdoc_string(jdoc_get(v, "type"))) && strcmp(type, "run") == 0)
        return v;
    jdoc_free(v);
    return NULL;
}

/* The rest of a result after its first line. */
static void read_rest(FILE *f, const char *file, struct buf *text)
{
    size_t got;
    if (!feof(f)) /* the first line ended with its newline */
        buf_append(text, "\n", 1);
    do {
        if (text->len > MERGE_MAX_FILE)
            merge_bad(file, "larger than %u MiB: not a volley result", MERGE_MAX_FILE >> 20);
        buf_reserve(text, 1 << 16);
        got = fread(text->data + text->len, 1, text->cap - text->len, f);
        text->len += got;
    } while (got > 0);
    if (ferror(f))
        die("cannot read %s: %s", file, strerror(errno));
}

/* One file: a --json result, or a --timeline (JSON Lines: its first line
 * says so). */
void merge_read_file(struct inputs *in, const char *name)
{
    bool is_stdin = strcmp(name, "-") == 0;
    const char *file = is_stdin ? "standard input" : name;
    FILE *f = is_stdin ? stdin : fopen(name, "rb");
    if (!f)
        die("cannot open %s: %s", name, strerror(errno));
    struct buf text = {0};
    next_line(f, file, &text);
    struct jdoc *run = run_line(file, &text);
    if (run) {
        read_series(&in->series[in->nseries++], file, run, f);
        jdoc_free(run);
    } else {
        read_rest(f, file, &text);
        read_part(&in->parts[in->nparts++], file, &text);
    }
    if (!is_stdin)
        fclose(f);
    buf_free(&text);
}
