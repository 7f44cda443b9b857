/* Reading volley merge's inputs: each file a --json result (one JSON
 * document) or a --timeline in JSON Lines (its first line a run record),
 * every figure checked, so that a file that is not what volley writes is
 * refused with one line instead of being added up.
 * SPDX-License-Identifier: MIT */
#include "merge_read.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "protocols.h"
#include "sources.h"
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

/* How a run ended: the members reason, signal and exit_status of v, which
 * prefix ("end." or "") names in messages. */
static struct run_end read_end(const char *where, const struct jdoc *v, const char *prefix)
{
    struct run_end end = {0};
    const char *reason = jdoc_string(jdoc_get(v, "reason"));
    const struct jdoc *sig = jdoc_get(v, "signal"), *status = jdoc_get(v, "exit_status");
    unsigned r = 0;
    while (reason && r < END_REASONS && strcmp(run_end_name((enum end_reason)r), reason) != 0)
        r++;
    if (!reason || r == END_REASONS)
        merge_bad(where, "%sreason: missing, or not how a run ends", prefix);
    end.reason = (enum end_reason)r;
    if (end.reason == END_INTERRUPTED) {
        const char *name = jdoc_string(sig);
        end.signal = name && strcmp(name, "SIGINT") == 0    ? SIGINT
                     : name && strcmp(name, "SIGTERM") == 0 ? SIGTERM
                                                            : 0;
        if (!end.signal)
            merge_bad(where, "%ssignal: missing, or not SIGINT or SIGTERM", prefix);
    } else if (!is_null(sig)) {
        merge_bad(where, "%ssignal: not null for a run that was not interrupted", prefix);
    }
    uint64_t code;
    if (end.reason == END_SCRIPT_EXIT) {
        if (!jdoc_u64(status, &code) || code > 255)
            merge_bad(where, "%sexit_status: missing, or not an exit status", prefix);
        end.status = (int)code;
    } else if (!is_null(status)) {
        merge_bad(where, "%sexit_status: not null for a run that os.exit() did not end", prefix);
    }
    return end;
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

/* Every distribution of the table: those of -R only in a part with -R
 * (null, or an object, otherwise), and those results of earlier versions
 * lack (STATS_OPTIONAL) only when the part has them; p->measured says
 * which it has. */
static void read_distributions(struct part *p)
{
    struct stats *s = p->stats;
    for (size_t i = 0; i < stats_ndists; i++) {
        const struct stats_dist *d = &stats_dists[i];
        if ((d->flags & STATS_OPTIONAL) && !jdoc_get(p->doc, d->key))
            continue;
        if ((d->flags & STATS_OPEN) && !p->open_model) {
            need_object(p->file, p->doc, d->key, true);
            continue;
        }
        distribution(p, d->key, stats_dist_get(s, d));
        p->measured |= 1u << i;
        uint64_t count = hist_count(stats_dist_get(s, d));
        if ((d->flags & STATS_PER_RESPONSE) && count != s->requests)
            merge_bad(p->file, "%s.count is %" PRIu64 ", not requests (%" PRIu64 ")", d->key, count,
                      s->requests);
    }
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
        p->stats->status[code] = n;
        total += n;
    }
    if (total != p->stats->requests)
        merge_bad(p->file, "status_codes add up to %" PRIu64 ", not to requests (%" PRIu64 ")",
                  total, p->stats->requests);
}

/* An optional member: absent (in results of earlier versions) or null is
 * 0. */
static uint64_t optional_u64(const char *file, const struct jdoc *o, const char *key)
{
    const struct jdoc *v = jdoc_get(o, key);
    return !v || is_null(v) ? 0 : need_u64(file, o, key);
}

/* The causes of the errors, which add up to at least the socket error
 * classes: they count errors that ended no request too. */
static void read_errors(struct part *p)
{
    const struct errors *e = &p->stats->errors;
    const struct jdoc *causes = need_object(p->file, p->doc, "error_causes", false);
    unsigned __int128 causes_total = 0;
    for (int c = 0; c < CAUSE_COUNT; c++) {
        /* A result of an earlier version lacks the causes added since:
         * it counted none of them. */
        const char *name = stats_cause_name(c);
        p->stats->causes[c] = jdoc_get(causes, name) ? need_u64(p->file, causes, name) : 0;
        causes_total += p->stats->causes[c];
    }
    /* The causes count errors that ended no request too. */
    if (causes_total < (unsigned __int128)e->connect + e->read + e->write + e->timeout)
        merge_bad(p->file, "error_causes add up to less than the socket errors");
    if (causes_total > UINT64_MAX)
        merge_bad(p->file, "errors: more than 2^64");
    /* each CONNECT answered so is one error of that cause */
    unsigned __int128 statuses = 0;
    for (int code = 0; code < STATS_STATUS_MAX; code++)
        statuses += p->stats->proxy_status[code];
    if (statuses != p->stats->causes[CAUSE_PROXY_STATUS])
        merge_bad(p->file, "proxy.connect_status adds up to other than error_causes.%s",
                  stats_cause_name(CAUSE_PROXY_STATUS));
}

/* Why the TLS handshakes failed, which adds up to their cause's count. A
 * result written before the breakdown has none: its failures count as
 * "other". */
static void read_tls_failures(struct part *p)
{
    const struct jdoc *tls = need_object(p->file, p->doc, "tls", true);
    uint64_t *f = p->stats->tls_failures, total = p->stats->causes[CAUSE_TLS_HANDSHAKE];
    unsigned __int128 sum = 0;
    char path[80];
    if (!tls || !jdoc_get(tls, "handshake_failures")) {
        f[TLS_FAIL_OTHER] = total;
        return;
    }
    need_object(p->file, p->doc, "tls.handshake_failures", false);
    for (int i = 0; i < TLS_FAIL_COUNT; i++) {
        snprintf(path, sizeof path, "tls.handshake_failures.%s", stats_tls_failure_name(i));
        sum += f[i] = need_u64(p->file, p->doc, path);
    }
    if (sum != total)
        merge_bad(p->file, "tls.handshake_failures do not add up to error_causes.tls_handshake");
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

/* A breakdown by code (stats.h's table), at in: each key a code's name. */
static void read_by_code(struct part *p, const struct stats_breakdown *b, const struct jdoc *in)
{
    const struct jdoc *codes = need_object(p->file, in, b->key, false);
    const char *object = stats_place_object(b->place);
    uint64_t *counts = stats_breakdown_at(p->stats, b);
    char name[STATS_CODE_NAME_MAX];
    for (size_t i = 0; i < codes->len; i++) {
        const struct jdoc_member *m = &codes->u.members[i];
        unsigned code = 0;
        while (code < b->n && strcmp(b->name(code, name), m->key) != 0)
            code++;
        if (code == b->n || !jdoc_u64(&m->value, &counts[code]))
            merge_bad(p->file, "%s.%s.%s: not a count of one of its codes", object, b->key, m->key);
    }
}

/* A place's object: required for the errors, null or an object for tls,
 * proxy, http2 and http3, for rate an object exactly with -R; NULL when it
 * is null (the counters there are then 0), the document for the top level.
 * A result of an earlier version has no http3 (it spoke no HTTP/3), nor
 * proxy (it went through none). */
static const struct jdoc *place_of(struct part *p, enum stats_place place)
{
    const char *name = stats_place_object(place);
    if (!name)
        return p->doc;
    if (place == STATS_AT_RATE)
        return need_object(p->file, p->doc, name, !p->open_model);
    if ((place == STATS_AT_HTTP3 || place == STATS_AT_PROXY) && !jdoc_get(p->doc, name))
        return NULL;
    return need_object(p->file, p->doc, name, place != STATS_AT_ERRORS);
}

/* Counter c of the table, at in (its place's object) and written as the
 * table says: a rate over the run (the count is that times its length),
 * a mean per the place's first counter (per), or a minimum (null: none). */
static uint64_t read_counter(struct part *p, const struct stats_counter *c, const struct jdoc *in,
                             uint64_t per)
{
    char path[80];
    const char *object = stats_place_object(c->place);
    snprintf(path, sizeof path, "%s%s%s", object ? object : "", object ? "." : "", c->key);
    if (c->flags & STATS_PER_SEC)
        return count_of(p->file, path,
                        need_number(p->file, p->doc, path) * (double)p->duration_us / 1e6);
    if (c->flags & STATS_MEAN)
        return per ? count_of(p->file, path, need_number(p->file, p->doc, path) * (double)per) : 0;
    if (c->rule == STATS_MIN && is_null(jdoc_get(in, c->key)))
        return UINT64_MAX;
    return need_u64(p->file, p->doc, path);
}

/* The counters of the table, place by place. */
static void read_counters(struct part *p)
{
    for (enum stats_place place = STATS_AT_TOTALS; place < STATS_AT_NONE; place++) {
        const struct jdoc *in = place_of(p, place);
        const struct stats_counter *first = NULL;
        for (size_t i = 0; in && i < stats_ncounters; i++) {
            const struct stats_counter *c = &stats_counters[i];
            if (c->place != place)
                continue;
            uint64_t per = first ? stats_counter_get(p->stats, first) : 0;
            *stats_counter_at(p->stats, c) = read_counter(p, c, in, per);
            if (!first)
                first = c;
        }
        for (size_t i = 0; in && i < stats_nbreakdowns; i++)
            if (stats_breakdowns[i].place == place && stats_breakdowns[i].name)
                read_by_code(p, &stats_breakdowns[i], in);
    }
}

/* The connections that spoke each protocol, which add up to connects. A
 * result of an earlier version has none: its one protocol spoke on all. */
static void read_protocol_counts(struct part *p)
{
    uint64_t *n = p->stats->by_protocol;
    unsigned __int128 total = 0;
    if (!jdoc_get(p->doc, "protocols")) {
        const char *one = spec_protocol(&p->spec);
        if (one)
            n[protocols_index(protocols_by_name(one))] = p->stats->connects;
        return;
    }
    const struct jdoc *o = need_object(p->file, p->doc, "protocols", false);
    for (size_t i = 0; i < o->len; i++) {
        const struct jdoc_member *m = &o->u.members[i];
        const struct proto_ops *proto = protocols_by_name(m->key);
        if (!proto || !jdoc_u64(&m->value, &n[protocols_index(proto)]))
            merge_bad(p->file, "protocols.%s: not a count of connections of a protocol", m->key);
        total += n[protocols_index(proto)];
    }
    if (total != p->stats->connects)
        merge_bad(p->file, "protocols add up to other than connects (%" PRIu64 ")",
                  p->stats->connects);
}

/* Counters, and what the text report needs that no counter holds. */
static void read_totals(struct part *p)
{
    const struct stats *s = p->stats;
    p->duration_us = need_u64(p->file, p->doc, "duration_us");
    read_counters(p);
    if (s->reopened > s->connects)
        merge_bad(p->file, "reopened: %" PRIu64 " of %" PRIu64 " connects", s->reopened,
                  s->connects);
    if (!p->duration_us && (s->requests || s->bytes))
        merge_bad(p->file, "duration_us: 0 for %" PRIu64 " responses", s->requests);
    read_protocol_counts(p);
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
    /* --start-at: how late it started; null without, absent before it existed */
    const struct jdoc *late = jdoc_get(p->doc, "start_late_us");
    p->start_late_known = late && !is_null(late);
    if (p->start_late_known && !jdoc_u64(late, &p->start_late_us))
        merge_bad(p->file, "start_late_us: not a number of microseconds or null");
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

/* The protocols a connection may have spoken: options.alpn, their ALPN ids
 * (an https run's); else options.protocol, the one there was (HTTP/1.1 in
 * results written before HTTP/2). */
static void read_protocols(struct part *p, const struct jdoc *o)
{
    const struct jdoc *alpn = jdoc_get(o, "alpn");
    const char *list[PROTOCOLS_COUNT + 1];
    size_t n = 0;
    bool ids = alpn && alpn->type == JDOC_ARRAY;
    if (ids) {
        for (size_t i = 0; i < alpn->len && n <= PROTOCOLS_COUNT; i++)
            if (!(list[n++] = jdoc_string(&alpn->u.items[i])))
                merge_bad(p->file, "options.alpn: not a list of protocols");
    } else if (jdoc_get(o, "protocol")) {
        list[n++] = need_string(p->file, o, "protocol");
    } else {
        list[n++] = "HTTP/1.1";
    }
    if (!spec_set_protocols(&p->spec, list, n, ids))
        merge_bad(p->file, "options.%s: not protocols volley speaks", ids ? "alpn" : "protocol");
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
    read_protocols(p, o);
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
    spec->proxy = optional_string(p->file, o, "proxy");
    spec->bind = optional_string(p->file, o, "bind");
    spec->bind_ports = optional_string(p->file, o, "bind_port_range");
    spec->script = optional_string(p->file, o, "script");
    char *engine = optional_string(p->file, o, "engine");
    if (engine && !spec_set_engine(spec, engine))
        merge_bad(p->file, "options.engine: '%s' is not an engine of volley's", engine);
    free(engine);
    read_option_lists(p, o);
    p->pipeline = need_u64(p->file, o, "pipeline");
    read_shard(p);
}

/* --bind: each source address's connections; null without (or absent, in
 * results of earlier versions). */
static void read_sources(struct part *p)
{
    const struct jdoc *list = jdoc_get(p->doc, "sources");
    if (!list || is_null(list))
        return;
    if (list->type != JDOC_ARRAY || list->len == 0 || list->len > SOURCES_MAX)
        merge_bad(p->file, "sources: not a list of source addresses");
    p->sources = xcalloc(list->len, sizeof *p->sources);
    p->nsources = list->len;
    for (size_t i = 0; i < list->len; i++) {
        const struct jdoc *a = &list->u.items[i];
        struct result_source *s = &p->sources[i];
        if (a->type != JDOC_OBJECT)
            merge_bad(p->file, "sources: not a list of source addresses");
        const char *address = need_string(p->file, a, "address");
        if (strlen(address) >= sizeof s->address)
            merge_bad(p->file, "sources: '%s' is not an address", address);
        strcpy(s->address, address);
        s->connects = need_u64(p->file, a, "connects");
        s->errors = need_u64(p->file, a, "connect_errors");
    }
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
    p->stats = xcalloc(1, sizeof *p->stats);
    stats_init(p->stats);
    read_options(p);
    read_start(p);
    read_totals(p);
    /* ends are start + duration: keep them far from overflowing */
    if (p->start_us > INT64_MAX / 2 || p->duration_us > (uint64_t)INT64_MAX / 2)
        merge_bad(file, "start_time_us or duration_us out of range");
    read_errors(p);
    read_tls_failures(p);
    read_status_codes(p);
    read_distributions(p);
    read_sources(p);
    /* a result written before the warm-up had connect_time has none */
    if (jdoc_get(need_object(file, p->doc, "warmup", true), "connect_time")) {
        p->warmup_connect = hist_new(STATS_LATENCY_MAX);
        distribution(p, "warmup.connect_time", p->warmup_connect);
    }
    read_server(p);
    /* a result written before volley said how runs end: as it was taken then */
    const struct jdoc *end = jdoc_get(p->doc, "end");
    p->end_known = end != NULL;
    if (end)
        p->end = read_end(file, need_object(file, p->doc, "end", false), "end.");
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

/* An interval's distribution (latency, latency_uncorrected: where names it). */
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
struct hist *merge_read_latency(const char *where, const struct stats_dist *d,
                                const struct slice_latency *l)
{
    const char *why;
    struct hist *h = hist_decode(l->hdr, &why);
    if (!h)
        merge_bad(where, "hdr_histogram: %s", why);
    uint64_t highest = hist_highest(h), count = hist_count(h);
    /* freed before saying why: exit 1 leaves nothing behind */
    if (highest != d->highest || count != l->count ||
        (count && !hist_set_summary(h, hist_min(h), l->max, l->mean, 0))) {
        hist_free(h);
        if (highest != d->highest)
            merge_bad(where,
                      "hdr_histogram: tracks values up to %" PRIu64 ", not up to %" PRIu64
                      " as volley does",
                      highest, d->highest);
        if (count != l->count)
            merge_bad(where, "hdr_histogram: holds %" PRIu64 " samples, but count says %" PRIu64,
                      count, l->count);
        merge_bad(where, "mean and max do not fit its histogram");
    }
    return h;
}

static void check_slice_latency(const char *where, const struct jdoc *record,
                                const struct stats_dist *d, struct slice_latency *l)
{
    char *at_name = xasprintf("%s: %s", where, d->column);
    read_slice_latency(at_name, need_object(where, record, d->column, false), l);
    hist_free(merge_read_latency(at_name, d, l));
    free(at_name);
}

/* The counters of the table with a timeline column (the error classes in
 * the errors object), and the status classes, which add up to requests. */
static void read_slice_counts(struct series *s, const char *where, const struct jdoc *record,
                              struct slice *sl)
{
    static const char *const classes[6] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
    const struct jdoc *errors = need_object(where, record, "errors", false);
    for (size_t i = 0; i < stats_ncounters; i++) {
        const struct stats_counter *c = &stats_counters[i];
        const struct jdoc *in = c->place == STATS_AT_ERRORS ? errors : record;
        if (!c->column || ((c->flags & STATS_OPEN) && !s->open_model))
            continue;
        if (c->flags & STATS_PER_SEC)
            sl->counts[i] = count_of(
                where, c->column, need_number(where, in, c->column) * (double)sl->length_us / 1e6);
        else
            sl->counts[i] = need_u64(where, in, c->column);
    }
    const struct jdoc *status = need_object(where, record, "status", false);
    uint64_t requests = sl->counts[STATS_COUNTER_requests];
    unsigned __int128 responses = 0;
    for (int c = 0; c < 6; c++)
        responses += sl->status[c] = need_u64(where, status, classes[c]);
    if (responses != requests)
        merge_bad(where, "status classes do not add up to requests (%" PRIu64 ")", requests);
}

/* The distributions of the table with a timeline column that the series
 * has: those of -R with it; from its first record on, those results of
 * earlier versions lack (STATS_OPTIONAL) when that record has them. */
static void read_slice_dists(struct series *s, const char *where, const struct jdoc *record,
                             struct slice *sl)
{
    for (size_t i = 0; i < stats_ndists; i++) {
        const struct stats_dist *d = &stats_dists[i];
        if (!d->column || ((d->flags & STATS_OPEN) && !s->open_model))
            continue;
        if (s->n == 0 && (!(d->flags & STATS_OPTIONAL) || jdoc_get(record, d->column)))
            s->measured |= 1u << i;
        if (!(s->measured & (1u << i)))
            continue;
        check_slice_latency(where, record, d, &sl->dists[i]);
        if ((d->flags & STATS_PER_RESPONSE) &&
            sl->dists[i].count != sl->counts[STATS_COUNTER_requests])
            merge_bad(where, "%s.count is %" PRIu64 ", not requests (%" PRIu64 ")", d->column,
                      sl->dists[i].count, sl->counts[STATS_COUNTER_requests]);
    }
}

/* Interval index of the series, the record on its line. */
static void read_slice(struct series *s, const char *where, const struct jdoc *record,
                       struct slice *sl)
{
    uint64_t index = s->n;
    const char *type = need_string(where, record, "type");
    if (strcmp(type, "interval") != 0)
        merge_bad(where, "type: \"%s\", not \"interval\" or \"end\"", type);
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
    read_slice_counts(s, where, record, sl);
    read_slice_dists(s, where, record, sl);
    const struct jdoc *server = jdoc_get(record, "server_cpu_s");
    sl->server_s = NAN;
    if (!server || (!is_null(server) && (!jdoc_double(server, &sl->server_s) || sl->server_s < 0)))
        merge_bad(where, "server_cpu_s: missing, or not a number >= 0 or null");
}

/* The last record: how the run ended, after the intervals it counts. */
static void read_end_record(struct series *s, const char *where, const struct jdoc *record)
{
    unsigned __int128 requests = 0;
    for (size_t k = 0; k < s->n; k++)
        requests += s->slices[k].counts[STATS_COUNTER_requests];
    s->end = read_end(where, record, "");
    s->ended = true;
    need_u64(where, record, "duration_us");
    if (need_u64(where, record, "intervals") != s->n)
        merge_bad(where, "intervals: not the %zu intervals before it", s->n);
    if (need_u64(where, record, "requests") != requests)
        merge_bad(where, "requests: not those of the intervals before it");
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
        if (s->ended)
            merge_bad(where, "a line after the end record");
        const char *type = jdoc_string(jdoc_get(record, "type"));
        if (type && strcmp(type, "end") == 0) {
            read_end_record(s, where, record);
        } else {
            memset(&s->slices[s->n], 0, sizeof s->slices[s->n]);
            read_slice(s, where, record, &s->slices[s->n]);
            s->n++;
        }
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
