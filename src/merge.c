/* volley merge: reads each --json result strictly (they come from other
 * machines), checks that they can be parts of one run, adds them up into a
 * struct result as one process would have measured it, and prints that
 * with the run's own report and JSON writers.
 * SPDX-License-Identifier: MIT */
#include "merge.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jdoc.h"
#include "report.h"
#include "units.h"
#include "xalloc.h"

/* volley's results are a few hundred KB at most. */
#define MERGE_MAX_FILE (64u << 20)
/* Far more machines than anyone runs a load from. */
#define MERGE_MAX_SHARDS 100000

/* One result file, as far as merging needs it. */
struct part {
    const char *file;
    struct jdoc *doc;
    const struct jdoc *options;
    const char *url;
    bool open_model, counted; /* -R, -n */
    bool http2;               /* --http2 (options.protocol) */
    struct shard shard;       /* count 0 when the file is not a shard */
    uint64_t threads, connections, requests;
    double rate;
    int64_t start_us;
    uint64_t duration_us;
    struct stats stats;
    struct {
        double user_s, system_s, wait_s, busiest;
        bool has_wait;
    } cpu;
};

static void bad(const struct part *p, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
static void bad(const struct part *p, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "volley: %s: ", p->file);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- reading one file ---------------------------------------------------- */

static char *slurp(const char *file, size_t *len)
{
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
    if (!f)
        die("cannot open %s: %s", file, strerror(errno));
    size_t cap = 1 << 16, n = 0, got;
    char *buf = xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n > MERGE_MAX_FILE)
            die("%s: larger than %u MiB: not a volley result", file, MERGE_MAX_FILE >> 20);
        if (n == cap)
            buf = xrealloc(buf, cap *= 2);
    }
    if (ferror(f))
        die("cannot read %s: %s", file, strerror(errno));
    if (f != stdin)
        fclose(f);
    *len = n;
    return buf;
}

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

static uint64_t need_u64(const struct part *p, const struct jdoc *in, const char *path)
{
    uint64_t v;
    if (!jdoc_u64(at(in, path), &v))
        bad(p, "%s: missing, or not a count", path);
    return v;
}

static double need_number(const struct part *p, const struct jdoc *in, const char *path)
{
    double v;
    if (!jdoc_double(at(in, path), &v) || v < 0)
        bad(p, "%s: missing, or not a number >= 0", path);
    return v;
}

static const char *need_string(const struct part *p, const struct jdoc *in, const char *path)
{
    const char *s = jdoc_string(at(in, path));
    if (!s)
        bad(p, "%s: missing, or not a string", path);
    return s;
}

static const struct jdoc *need_object(const struct part *p, const struct jdoc *in, const char *path,
                                      bool nullable)
{
    const struct jdoc *v = at(in, path);
    if (nullable && is_null(v))
        return NULL;
    if (!v || v->type != JDOC_OBJECT)
        bad(p, "%s: missing, or not an object", path);
    return v;
}

/* A distribution's histogram with the exact figures the document gives
 * beside it, added into dst (whose layout it must have). */
static void distribution(struct part *p, const struct jdoc *d, const char *name, struct hist *dst)
{
    char path[64];
    const char *why;
    snprintf(path, sizeof path, "%s.hdr_histogram", name);
    struct hist *h = hist_decode(need_string(p, d, "hdr_histogram"), &why);
    if (!h)
        bad(p, "%s: %s", path, why);
    uint64_t count = need_u64(p, d, "count");
    if (hist_highest(h) != hist_highest(dst))
        bad(p, "%s: tracks values up to %" PRIu64 ", not up to %" PRIu64 " as volley does", path,
            hist_highest(h), hist_highest(dst));
    if (hist_count(h) != count)
        bad(p, "%s: holds %" PRIu64 " samples, but %s.count says %" PRIu64, path, hist_count(h),
            name, count);
    if (count && !hist_set_summary(h, need_u64(p, d, "min"), need_u64(p, d, "max"),
                                   need_number(p, d, "mean"), need_number(p, d, "stdev")))
        bad(p, "%s: min, max, mean and stdev do not fit its histogram", name);
    hist_merge(dst, h);
    hist_free(h);
}

static void read_distributions(struct part *p)
{
    const struct jdoc *doc = p->doc;
    struct stats *s = &p->stats;
    distribution(p, need_object(p, doc, "latency", false), "latency", s->latency);
    distribution(p, need_object(p, doc, "requests_per_sec", false), "requests_per_sec", s->rps);
    const struct jdoc *u = need_object(p, doc, "latency_uncorrected", !p->open_model);
    const struct jdoc *lag = need_object(p, doc, "scheduling_lag", !p->open_model);
    if (p->open_model) {
        distribution(p, u, "latency_uncorrected", s->u_latency);
        distribution(p, lag, "scheduling_lag", s->lag);
    }
    if (hist_count(s->latency) != s->requests)
        bad(p, "latency.count is %" PRIu64 ", not requests (%" PRIu64 ")", hist_count(s->latency),
            s->requests);
}

/* "200": 12 ... and "other": n; they add up to requests. */
static void read_status_codes(struct part *p)
{
    const struct jdoc *codes = need_object(p, p->doc, "status_codes", false);
    uint64_t total = 0;
    for (size_t i = 0; i < codes->len; i++) {
        const struct jdoc_member *m = &codes->u.members[i];
        uint64_t code = 0, n;
        char *end;
        if (strcmp(m->key, "other") != 0) {
            code = strtoull(m->key, &end, 10);
            if (*end || m->key[0] < '1' || m->key[0] > '9' || code >= STATS_STATUS_MAX)
                bad(p, "status_codes: \"%s\" is not a status code", m->key);
        }
        if (!jdoc_u64(&m->value, &n) || total + n < total)
            bad(p, "status_codes.%s: not a count", m->key);
        p->stats.status[code] = n;
        total += n;
    }
    if (total != p->stats.requests)
        bad(p, "status_codes add up to %" PRIu64 ", not to requests (%" PRIu64 ")", total,
            p->stats.requests);
}

/* The error classes, and their causes, which add up to them. */
static void read_errors(struct part *p)
{
    struct errors *e = &p->stats.errors;
    const struct jdoc *errors = need_object(p, p->doc, "errors", false);
    const struct jdoc *causes = need_object(p, p->doc, "error_causes", false);
    e->connect = need_u64(p, errors, "connect");
    e->read = need_u64(p, errors, "read");
    e->write = need_u64(p, errors, "write");
    e->timeout = need_u64(p, errors, "timeout");
    e->status = need_u64(p, errors, "status");
    unsigned __int128 causes_total = 0;
    for (int c = 0; c < CAUSE_COUNT; c++) {
        p->stats.causes[c] = need_u64(p, causes, stats_cause_name(c));
        causes_total += p->stats.causes[c];
    }
    if (causes_total != (unsigned __int128)e->connect + e->read + e->write + e->timeout)
        bad(p, "error_causes do not add up to the socket errors");
    if (causes_total > UINT64_MAX)
        bad(p, "errors: more than 2^64");
}

/* What an HTTP/2 run saw of the protocol: null or absent for HTTP/1.1. */
static void read_http2(struct part *p)
{
    const struct jdoc *h2 = need_object(p, p->doc, "http2", true), *codes;
    struct h2_stats *s = &p->stats.h2;
    if (!h2 || !p->http2)
        return;
    s->goaways = need_u64(p, h2, "goaway_received");
    s->refused = need_u64(p, h2, "refused");
    if (!is_null(jdoc_get(h2, "streams"))) {
        s->streams = need_u64(p, h2, "streams");
        s->settings = 1;
    }
    codes = need_object(p, h2, "rst_stream_received", false);
    for (size_t i = 0; i < codes->len; i++) {
        const struct jdoc_member *m = &codes->u.members[i];
        unsigned code = 0;
        while (code < STATS_H2_CODES && strcmp(stats_h2_code_name(code), m->key) != 0)
            code++;
        if (code == STATS_H2_CODES || !jdoc_u64(&m->value, &s->resets[code]))
            bad(p, "http2.rst_stream_received.%s: not an error code's count", m->key);
    }
}

/* Counters, and what the text report needs that no counter holds. */
static void read_totals(struct part *p)
{
    const struct jdoc *doc = p->doc;
    struct stats *s = &p->stats;
    s->requests = need_u64(p, doc, "requests");
    s->bytes = need_u64(p, doc, "bytes");
    s->connects = need_u64(p, doc, "connects");
    s->reconnects = need_u64(p, doc, "reconnects");
    p->duration_us = need_u64(p, doc, "duration_us");
    const struct jdoc *tls = need_object(p, doc, "tls", true);
    if (tls) {
        s->handshakes = need_u64(p, tls, "handshakes");
        s->resumed = need_u64(p, tls, "resumed");
        if (s->handshakes)
            s->handshake_us =
                (uint64_t)llround(need_number(p, tls, "handshake_mean_us") * (double)s->handshakes);
    }
    read_http2(p);
    /* sent is written as a rate over the run; the count is that times its length */
    const struct jdoc *rate = need_object(p, doc, "rate", !p->open_model);
    if (rate)
        s->sent = (uint64_t)llround(need_number(p, rate, "sent") * (double)p->duration_us / 1e6);
    const struct jdoc *cpu = need_object(p, doc, "cpu", false);
    p->cpu.user_s = need_number(p, cpu, "user_s");
    p->cpu.system_s = need_number(p, cpu, "system_s");
    p->cpu.busiest = need_number(p, cpu, "busiest_thread");
    p->cpu.has_wait = !is_null(jdoc_get(cpu, "run_queue_wait_s"));
    if (p->cpu.has_wait)
        p->cpu.wait_s = need_number(p, cpu, "run_queue_wait_s");
}

/* When the part started: start_time_us, or for a result written before it
 * existed, start_time to the millisecond. */
static void read_start(struct part *p)
{
    const struct jdoc *us = jdoc_get(p->doc, "start_time_us");
    uint64_t v;
    if (us) {
        if (!jdoc_u64(us, &v) || v > INT64_MAX)
            bad(p, "start_time_us: not a time");
        p->start_us = (int64_t)v;
    } else if (!units_parse_instant(need_string(p, p->doc, "start_time"), &p->start_us)) {
        bad(p, "start_time: not an RFC 3339 time");
    }
}

/* What was asked for, and this part's share of it. */
static void read_options(struct part *p)
{
    const struct jdoc *o = p->options = need_object(p, p->doc, "options", false);
    p->url = need_string(p, o, "url");
    p->threads = need_u64(p, o, "threads");
    p->connections = need_u64(p, o, "connections");
    p->open_model = !is_null(jdoc_get(o, "rate"));
    p->counted = !is_null(jdoc_get(o, "requests"));
    /* results written before HTTP/2 have no protocol: HTTP/1.1 */
    const char *protocol = jdoc_string(jdoc_get(o, "protocol"));
    p->http2 = protocol && strcmp(protocol, "HTTP/2") == 0;
    p->rate = p->open_model ? (double)need_u64(p, o, "rate") : 0;
    p->requests = p->counted ? need_u64(p, o, "requests") : 0;
    const struct jdoc *sh = need_object(p, p->doc, "shard", true);
    if (!sh)
        return;
    p->shard.index = need_u64(p, sh, "index");
    p->shard.count = need_u64(p, sh, "count");
    if (p->shard.index >= p->shard.count)
        bad(p, "shard.index: %" PRIu64 " of %" PRIu64 " shards", p->shard.index, p->shard.count);
    if (p->shard.count > MERGE_MAX_SHARDS)
        bad(p, "shard.count: more than %d shards", MERGE_MAX_SHARDS);
    p->connections = need_u64(p, sh, "connections");
    p->rate = p->open_model ? need_number(p, sh, "rate") : 0;
    p->requests = p->counted ? need_u64(p, sh, "requests") : 0;
}

static void read_part(struct part *p, const char *file)
{
    size_t len;
    char err[160];
    char *text = slurp(file, &len);
    p->file = strcmp(file, "-") == 0 ? "standard input" : file;
    p->doc = jdoc_parse(text, len, err, sizeof err);
    free(text);
    if (!p->doc)
        bad(p, "%s", err);
    if (p->doc->type != JDOC_OBJECT)
        bad(p, "not a volley result (not a JSON object)");
    uint64_t version = need_u64(p, p->doc, "schema_version");
    if (version != 1)
        bad(p, "schema version %" PRIu64 "; this volley reads version 1", version);
    stats_init(&p->stats);
    read_options(p);
    read_start(p);
    read_totals(p);
    /* ends are start + duration: keep them far from overflowing */
    if (p->start_us > INT64_MAX / 2 || p->duration_us > (uint64_t)INT64_MAX / 2)
        bad(p, "start_time_us or duration_us out of range");
    read_errors(p);
    read_status_codes(p);
    read_distributions(p);
}

/* ---- one run? ------------------------------------------------------------ */

static bool same_value(const struct jdoc *a, const struct jdoc *b);

/* Every member of a is in b with the same value, except the one named skip. */
static bool same_members(const struct jdoc *a, const struct jdoc *b, const char *skip)
{
    for (size_t i = 0; i < a->len; i++) {
        const char *key = a->u.members[i].key;
        if ((!skip || strcmp(key, skip) != 0) &&
            !same_value(&a->u.members[i].value, jdoc_get(b, key)))
            return false;
    }
    return true;
}

static bool same_value(const struct jdoc *a, const struct jdoc *b)
{
    if (!a || !b || a->type != b->type || a->len != b->len)
        return false;
    switch (a->type) {
    case JDOC_STRING:
    case JDOC_NUMBER:
        return strcmp(a->u.text, b->u.text) == 0;
    case JDOC_ARRAY:
        for (size_t i = 0; i < a->len; i++)
            if (!same_value(&a->u.items[i], &b->u.items[i]))
                return false;
        return true;
    case JDOC_OBJECT:
        return same_members(a, b, NULL);
    default:
        return true;
    }
}

/* Parts of one run hit the same URL in the same load model; the shards of
 * one sharded run were given the same options and are each there once. */
static void check_same_run(const struct part *p, const struct part *first, const bool *seen)
{
    if (strcmp(p->url, first->url) != 0)
        bad(p, "a run against %s, not %s like %s", p->url, first->url, first->file);
    if (p->open_model != first->open_model)
        bad(p, "%s with -R and %s without cannot be one run", p->open_model ? p->file : first->file,
            p->open_model ? first->file : p->file);
    if (p->counted != first->counted)
        bad(p, "%s with -n and %s without cannot be one run", p->counted ? p->file : first->file,
            p->counted ? first->file : p->file);
    if (p->http2 != first->http2)
        bad(p, "%s over HTTP/2 and %s over HTTP/1.1 cannot be one run",
            p->http2 ? p->file : first->file, p->http2 ? first->file : p->file);
    if (!p->shard.count != !first->shard.count)
        bad(p, "a shard and a whole run cannot be parts of one run (%s is %s)", first->file,
            first->shard.count ? "a shard" : "a whole run");
    if (!p->shard.count)
        return;
    if (p->shard.count != first->shard.count)
        bad(p, "shard %" PRIu64 " of %" PRIu64 ", but %s is one of %" PRIu64, p->shard.index,
            p->shard.count, first->file, first->shard.count);
    /* threads may differ: a shard with fewer connections than -t has fewer */
    if (!same_members(first->options, p->options, "threads") ||
        !same_members(p->options, first->options, "threads"))
        bad(p, "options differ from those of %s: shards of one run are given the same options",
            first->file);
    if (seen[p->shard.index])
        bad(p, "shard %" PRIu64 " is there twice", p->shard.index);
}

/* ---- the whole ----------------------------------------------------------- */

static void add_count(const struct part *p, uint64_t *total, uint64_t v, const char *what)
{
    if (*total + v < *total)
        bad(p, "the total of %s passes 2^64", what);
    *total += v;
}

/* stats_merge adds without checks: counts near 2^64 in a hostile file must
 * not wrap round into small ones. Status codes and causes are bounded by
 * the requests and errors they add up to. */
static void check_sums(const struct part *p, const struct stats *t)
{
    const struct stats *s = &p->stats;
    const struct errors *te = &t->errors, *se = &s->errors;
    const uint64_t sums[][2] = {
        {t->requests, s->requests},
        {t->bytes, s->bytes},
        {t->sent, s->sent},
        {t->connects, s->connects},
        {t->reconnects, s->reconnects},
        {t->handshakes, s->handshakes},
        {t->handshake_us, s->handshake_us},
        {te->connect + te->read + te->write + te->timeout,
         se->connect + se->read + se->write + se->timeout},
        {te->status, se->status},
        {hist_count(t->rps), hist_count(s->rps)},
        {hist_count(t->u_latency), hist_count(s->u_latency)},
        {hist_count(t->lag), hist_count(s->lag)},
        {t->h2.goaways, s->h2.goaways},
        {t->h2.refused, s->h2.refused},
    };
    for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++)
        if (sums[i][0] + sums[i][1] < sums[i][0])
            bad(p, "counts too large to add up (past 2^64)");
    for (int code = 0; code < STATS_H2_CODES; code++)
        if (t->h2.resets[code] + s->h2.resets[code] < t->h2.resets[code])
            bad(p, "counts too large to add up (past 2^64)");
}

/* The options the merged result reports: the first part's, with the
 * connections, rate and requests of all the parts. */
static void whole_config(struct config *cfg, const struct part *parts, size_t n, bool latency)
{
    const struct part *first = &parts[0];
    const struct jdoc *o = first->options, *list;
    const char *why;
    memset(cfg, 0, sizeof *cfg);
    cfg->url_arg = xstrdup(first->url);
    if (!url_parse(cfg->url_arg, &cfg->url, &why))
        bad(first, "options.url: %s", why);
    double rate = 0;
    for (size_t i = 0; i < n; i++) {
        add_count(&parts[i], &cfg->threads, parts[i].threads, "threads");
        add_count(&parts[i], &cfg->connections, parts[i].connections, "connections");
        add_count(&parts[i], &cfg->requests, parts[i].requests, "requests");
        rate += parts[i].rate;
    }
    cfg->rate = (uint64_t)llround(rate);
    if (first->open_model && cfg->rate == 0)
        cfg->rate = 1;
    /* the shares of a whole -R add up to it, but for the last bits of a double */
    if (fabs(rate - (double)cfg->rate) < 1e-9 * rate)
        rate = (double)cfg->rate;
    cfg->shard =
        (struct shard){.connections = cfg->connections, .requests = cfg->requests, .rate = rate};
    /* null: no time limit (-n without -d, or -d 0) */
    const struct jdoc *limit = jdoc_get(o, "duration_us");
    cfg->duration_us = is_null(limit) ? 0 : need_u64(first, o, "duration_us");
    cfg->duration_set = !first->counted || !is_null(limit);
    cfg->time_limit_us = cfg->duration_us;
    cfg->timeout_us = need_u64(first, o, "timeout_us");
    cfg->http2 = first->http2;
    cfg->streams = jdoc_get(o, "streams") ? need_u64(first, o, "streams") : 1;
    cfg->latency = latency;
    cfg->no_keepalive = jdoc_get(o, "keepalive") && jdoc_get(o, "keepalive")->type == JDOC_FALSE;
    if (jdoc_string(jdoc_get(o, "unix_socket")))
        cfg->unix_socket = xstrdup(jdoc_string(jdoc_get(o, "unix_socket")));
    if (jdoc_string(jdoc_get(o, "script")))
        cfg->script = xstrdup(jdoc_string(jdoc_get(o, "script")));
    if ((list = jdoc_get(o, "script_args")) && list->type == JDOC_ARRAY) {
        cfg->script_args = xcalloc(list->len + 1, sizeof *cfg->script_args);
        for (size_t i = 0; i < list->len; i++)
            if (jdoc_string(&list->u.items[i]))
                cfg->script_args[cfg->nscript_args++] = xstrdup(list->u.items[i].u.text);
    }
    if ((list = jdoc_get(o, "headers")) && list->type == JDOC_ARRAY) {
        cfg->headers = xcalloc(list->len + 1, sizeof *cfg->headers);
        for (size_t i = 0; i < list->len; i++) {
            const struct jdoc *h = &list->u.items[i];
            if (h->type == JDOC_ARRAY && h->len == 2 && jdoc_string(&h->u.items[0]) &&
                jdoc_string(&h->u.items[1]))
                cfg->headers[cfg->nheaders++] =
                    (struct header){xstrdup(h->u.items[0].u.text), xstrdup(h->u.items[1].u.text)};
        }
    }
}

/* The run's span is from the earliest start to the latest end. (Series
 * over time, once results carry them, add up here too: interval by
 * interval, aligned on wall time by each part's start_time_us.) */
static void whole_result(struct result *r, struct part *parts, size_t n, struct result_input *list)
{
    int64_t start = INT64_MAX, end = INT64_MIN;
    stats_init(&r->stats);
    r->cpu.has_wait = true;
    for (size_t i = 0; i < n; i++) {
        struct part *p = &parts[i];
        int64_t p_end = p->start_us + (int64_t)p->duration_us;
        start = p->start_us < start ? p->start_us : start;
        end = p_end > end ? p_end : end;
        check_sums(p, &r->stats);
        stats_merge(&r->stats, &p->stats);
        r->cpu.user_s += p->cpu.user_s;
        r->cpu.system_s += p->cpu.system_s;
        r->cpu.wait_s += p->cpu.wait_s;
        r->cpu.has_wait &= p->cpu.has_wait;
        r->cpu.busiest = p->cpu.busiest > r->cpu.busiest ? p->cpu.busiest : r->cpu.busiest;
        list[i] = (struct result_input){p->file,           p->start_us,         p->duration_us,
                                        p->stats.requests, p->shard.count != 0, p->shard.index};
    }
    r->runtime_us = (uint64_t)(end - start);
    r->started = (struct timespec){start / 1000000, start % 1000000 * 1000};
    r->pipeline = need_u64(&parts[0], parts[0].options, "pipeline");
    if (r->cfg->rate) {
        r->latency_uncorrected = r->stats.u_latency;
        r->scheduling_lag = r->stats.lag;
    }
    r->inputs = list;
    r->ninputs = n;
}

/* "  merged 4 shards of 4, started within 0.42ms": which parts, and how
 * closely they started, before the report of the whole. */
static void describe(FILE *f, const struct part *parts, size_t n, const bool *seen)
{
    int64_t first = INT64_MAX, last = INT64_MIN;
    char spread[UNITS_BUF];
    for (size_t i = 0; i < n; i++) {
        first = parts[i].start_us < first ? parts[i].start_us : first;
        last = parts[i].start_us > last ? parts[i].start_us : last;
    }
    if (parts[0].shard.count)
        fprintf(f, "  merged %zu of %" PRIu64 " shards", n, parts[0].shard.count);
    else
        fprintf(f, "  merged %zu results", n);
    fprintf(f, ", started within %s", units_time_us((long double)(last - first), spread));
    if (parts[0].shard.count && n < parts[0].shard.count) {
        fputs("; missing:", f);
        for (uint64_t i = 0; i < parts[0].shard.count; i++)
            if (!seen[i])
                fprintf(f, " %" PRIu64, i);
    }
    fputc('\n', f);
}

static void write_json(const char *path, const struct result *r)
{
    bool to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f)
        die("cannot open %s: %s", path, strerror(errno));
    bool ok = report_json(f, r);
    if ((to_stdout ? fflush(f) : fclose(f)) != 0 || !ok)
        die("cannot write %s: %s", to_stdout ? "JSON to stdout" : path, strerror(errno));
}

int merge_main(int argc, char **argv)
{
    struct merge_config mc;
    struct config cfg;
    struct result result = {.cfg = &cfg};
    cli_parse_merge(argc, argv, &mc);
    struct part *parts = xcalloc(mc.nfiles, sizeof *parts);
    bool *seen = NULL;
    for (size_t i = 0; i < mc.nfiles; i++) {
        read_part(&parts[i], mc.files[i]);
        if (i == 0 && parts[0].shard.count)
            seen = xcalloc(parts[0].shard.count, sizeof *seen);
        check_same_run(&parts[i], &parts[0], seen);
        if (seen)
            seen[parts[i].shard.index] = true;
    }
    struct result_input *list = xcalloc(mc.nfiles, sizeof *list);
    whole_config(&cfg, parts, mc.nfiles, mc.latency);
    whole_result(&result, parts, mc.nfiles, list);

    /* With the JSON on stdout, the report goes to stderr, as for a run. */
    FILE *text = mc.json && strcmp(mc.json, "-") == 0 ? stderr : stdout;
    report_header(text, &cfg);
    describe(text, parts, mc.nfiles, seen);
    report_text(text, &result);
    report_warnings(text, &result);
    fflush(text);
    if (mc.json)
        write_json(mc.json, &result);

    for (size_t i = 0; i < mc.nfiles; i++) {
        stats_free(&parts[i].stats);
        jdoc_free(parts[i].doc);
    }
    free(parts);
    free(list);
    free(seen);
    stats_free(&result.stats);
    cli_free(&cfg);
    cli_free_merge(&mc);
    return 0;
}
