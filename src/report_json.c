/* The machine-readable report: one JSON document per run, in the versioned
 * schema described in docs/json.md. Times are microseconds unless a field's
 * name says otherwise; every field is always present (null when it does not
 * apply), so consumers need no existence checks.
 * SPDX-License-Identifier: MIT */
#include "protocols.h"
#include "report.h"

#include <math.h>
#include <stdlib.h>

#include "json.h"
#include "metrics.h"
#include "spec.h"
#include "threshold.h"
#include "timeline.h"
#include "units.h"
#include "version.h"

/* Bump when a field changes meaning or disappears; adding fields does not. */
#define SCHEMA_VERSION 1

static const double percentiles[] = {50, 75, 90, 99, 99.9, 99.99, 99.999, 100};

/* A share of -R is an exact fraction; whole rates stay integers. */
static void rate_number(struct json *j, const char *key, double v)
{
    if (v == floor(v) && v < 0x1p64)
        json_uint(j, key, (uint64_t)v);
    else
        json_double(j, key, v);
}

/* This process's part of a sharded run; null for a whole run. */
static void shard(struct json *j, const struct run_spec *spec)
{
    const struct shard *s = &spec->shard;
    if (!s->count) {
        json_null(j, "shard");
        return;
    }
    json_object_begin(j, "shard");
    json_uint(j, "index", s->index);
    json_uint(j, "count", s->count);
    json_uint(j, "connections", s->connections);
    if (spec->rate)
        rate_number(j, "rate", s->rate);
    else
        json_null(j, "rate");
    if (spec->requests)
        json_uint(j, "requests", s->requests);
    else
        json_null(j, "requests");
    json_object_end(j);
}

/* volley merge: the results the document adds up; null for a run. */
static void inputs(struct json *j, const struct result *r)
{
    if (!r->inputs) {
        json_null(j, "inputs");
        return;
    }
    json_array_begin(j, "inputs");
    for (size_t i = 0; i < r->ninputs; i++) {
        const struct result_input *in = &r->inputs[i];
        json_object_begin(j, NULL);
        json_string(j, "file", in->file);
        json_string(j, "timeline", in->timeline);
        if (in->sharded)
            json_uint(j, "shard", in->shard);
        else
            json_null(j, "shard");
        json_uint(j, "start_time_us", (uint64_t)in->start_us);
        json_uint(j, "duration_us", in->duration_us);
        json_uint(j, "requests", in->requests);
        json_object_end(j);
    }
    json_array_end(j);
}

/* Statistics of a histogram. An empty one has count 0 and nulls: there is
 * no minimum of nothing. */
static void moments(struct json *j, const struct hist *h)
{
    uint64_t n = hist_count(h);
    double mean = hist_mean(h), stdev = hist_stdev(h);
    json_uint(j, "count", n);
    if (n == 0) {
        json_null(j, "min");
        json_null(j, "max");
        json_null(j, "mean");
        json_null(j, "stdev");
        json_null(j, "within_stdev");
        return;
    }
    json_uint(j, "min", hist_min(h));
    json_uint(j, "max", hist_max(h));
    json_double(j, "mean", mean);
    json_double(j, "stdev", stdev);
    json_double(j, "within_stdev", hist_within_stdev(h, mean, stdev));
}

/* A distribution: moments, HdrHistogram's percentiles (the values any
 * HdrHistogram library finds in hdr_histogram; not for STATS_MOMENTS) and
 * the histogram; null when the run did not measure it. */
static void distribution(struct json *j, const struct stats_dist *d, const struct hist *h,
                         bool measured)
{
    char name[16];
    if (!measured) {
        json_null(j, d->key);
        return;
    }
    json_object_begin(j, d->key);
    moments(j, h);
    if (!(d->flags & STATS_MOMENTS)) {
        json_object_begin(j, "percentiles");
        for (size_t i = 0; i < sizeof percentiles / sizeof percentiles[0]; i++) {
            snprintf(name, sizeof name, "%g", percentiles[i]);
            if (hist_count(h))
                json_uint(j, name, hist_value_at_percentile(h, percentiles[i]));
            else
                json_null(j, name);
        }
        json_object_end(j);
    }
    char *encoded = hist_encode(h);
    json_string(j, "hdr_histogram", encoded);
    free(encoded);
    json_object_end(j);
}

static void distributions(struct json *j, const struct result *r)
{
    uint32_t measured = stats_dists_measured(r->spec->rate != 0) & ~r->missing;
    for (size_t i = 0; i < stats_ndists; i++)
        distribution(j, &stats_dists[i], stats_dist_get(&r->stats, &stats_dists[i]),
                     measured & (1u << i));
}

/* The counters of the table that sit at place, in its order (stats.h):
 * a count, a rate over the run, a mean per the place's first counter, or
 * a minimum (null when there is none). */
static void counters(struct json *j, const struct stats *s, enum stats_place place, double seconds)
{
    const struct stats_counter *first = NULL;
    for (size_t i = 0; i < stats_ncounters; i++) {
        const struct stats_counter *c = &stats_counters[i];
        if (c->place != place)
            continue;
        uint64_t v = stats_counter_get(s, c), per = first ? stats_counter_get(s, first) : 0;
        if (!first)
            first = c;
        if (c->flags & STATS_PER_SEC)
            json_double(j, c->key, seconds > 0 ? (double)v / seconds : 0);
        else if ((c->flags & STATS_MEAN) && per)
            json_double(j, c->key, (double)v / (double)per);
        else if ((c->flags & STATS_MEAN) || (c->rule == STATS_MIN && v == UINT64_MAX))
            json_null(j, c->key);
        else
            json_uint(j, c->key, v);
    }
}

/* Successful responses (status below 400) over every attempt that ended:
 * responses plus socket errors. */
static void success(struct json *j, const struct stats *s)
{
    const struct errors *e = &s->errors;
    uint64_t ok = s->requests - e->status;
    uint64_t attempts = s->requests + e->connect + e->read + e->write + e->timeout;
    json_object_begin(j, "success");
    json_uint(j, "ok", ok);
    json_uint(j, "attempts", attempts);
    if (attempts)
        json_double(j, "percent", 100.0 * (double)ok / (double)attempts);
    else
        json_null(j, "percent");
    json_object_end(j);
}

static void errors(struct json *j, const struct stats *s)
{
    json_object_begin(j, "errors");
    counters(j, s, STATS_AT_ERRORS, 0);
    json_object_end(j);
    json_object_begin(j, "error_causes");
    for (int c = 0; c < CAUSE_COUNT; c++)
        json_uint(j, stats_cause_name(c), s->causes[c]);
    json_object_end(j);
}

static void status_codes(struct json *j, const struct stats *s)
{
    char code[8];
    json_object_begin(j, "status_codes");
    for (int i = 1; i < STATS_STATUS_MAX; i++) {
        if (s->status[i]) {
            snprintf(code, sizeof code, "%d", i);
            json_uint(j, code, s->status[i]);
        }
    }
    if (s->status[0])
        json_uint(j, "other", s->status[0]);
    json_object_end(j);
}

static void rate(struct json *j, const struct result *r, double seconds)
{
    if (!r->spec->rate) {
        json_null(j, "rate");
        return;
    }
    json_object_begin(j, "rate");
    rate_number(j, "target", r->rate_target);
    json_double(j, "achieved", seconds > 0 ? (double)r->stats.requests / seconds : 0);
    counters(j, &r->stats, STATS_AT_RATE, seconds);
    json_object_end(j);
}

/* A breakdown by code: an object keyed by the codes' names, those never
 * counted left out. */
static void by_code(struct json *j, const struct stats *s, const struct stats_breakdown *b)
{
    const uint64_t *counts = stats_breakdown_get(s, b);
    char name[STATS_CODE_NAME_MAX];
    json_object_begin(j, b->key);
    for (unsigned code = 0; code < b->n; code++)
        if (counts[code])
            json_uint(j, b->name(code, name), counts[code]);
    json_object_end(j);
}

/* A place's object: its counters, or null when the run has none there.
 * Handshake figures (tls) are for https URLs: latency never includes them. */
static void place_object(struct json *j, const struct stats *s, enum stats_place place, bool has)
{
    const char *key = stats_place_object(place);
    if (!has) {
        json_null(j, key);
        return;
    }
    json_object_begin(j, key);
    counters(j, s, place, 0);
    for (size_t i = 0; i < stats_nbreakdowns; i++)
        if (stats_breakdowns[i].place == place && stats_breakdowns[i].name)
            by_code(j, s, &stats_breakdowns[i]);
    if (place == STATS_AT_TLS) {
        json_object_begin(j, "handshake_failures");
        for (int i = 0; i < TLS_FAIL_COUNT; i++)
            json_uint(j, stats_tls_failure_name(i), s->tls_failures[i]);
        json_object_end(j);
    }
    json_object_end(j);
}

/* --bind: each source address's connections, in the list's order; null
 * without. */
static void sources(struct json *j, const struct result *r)
{
    if (!r->sources) {
        json_null(j, "sources");
        return;
    }
    json_array_begin(j, "sources");
    for (size_t i = 0; i < r->nsources; i++) {
        json_object_begin(j, NULL);
        json_string(j, "address", r->sources[i].address);
        json_uint(j, "connects", r->sources[i].connects);
        json_uint(j, "connect_errors", r->sources[i].errors);
        json_object_end(j);
    }
    json_array_end(j);
}

/* The connections that spoke each protocol (those no connection spoke are
 * absent). */
static void protocols(struct json *j, const struct stats *s)
{
    json_object_begin(j, "protocols");
    for (size_t i = 0; i < PROTOCOLS_COUNT; i++)
        if (s->by_protocol[i])
            json_uint(j, protocols_all[i]->name, s->by_protocol[i]);
    json_object_end(j);
}

static void cpu(struct json *j, const struct result *r)
{
    struct cpu_load load;
    report_cpu_load(r, &load);
    json_object_begin(j, "cpu");
    json_double(j, "user_s", r->cpu.user_s);
    json_double(j, "system_s", r->cpu.system_s);
    json_uint(j, "cpus", (uint64_t)load.cpus);
    json_double(j, "utilisation", load.utilisation);
    if (r->cpu.has_wait)
        json_double(j, "run_queue_wait_s", r->cpu.wait_s);
    else
        json_null(j, "run_queue_wait_s");
    json_double(j, "busiest_thread", r->cpu.busiest);
    json_bool(j, "saturated", load.saturated);
    json_object_end(j);
}

/* --warmup: what it recorded, apart from everything else; null without. */
static void warmup(struct json *j, const struct result *r)
{
    const struct stats *s = r->warmup;
    if (!s) {
        json_null(j, "warmup");
        return;
    }
    json_object_begin(j, "warmup");
    json_uint(j, "duration_us", r->spec->warmup_us);
    json_uint(j, "requests", s->requests);
    json_uint(j, "sent", s->sent);
    json_uint(j, "bytes", s->bytes);
    json_uint(j, "connects", s->connects);
    errors(j, s);
    /* the connections it opened, which the run goes on over */
    distribution(j, &stats_dists[STATS_DIST_connect], s->connect, true);
    json_object_end(j);
}

bool report_json(FILE *f, const struct result *r)
{
    const struct stats *s = &r->stats;
    double seconds = (double)r->runtime_us / 1e6;
    char date[UNITS_BUF];
    struct json j;
    json_init(&j, f);
    json_object_begin(&j, NULL);
    json_uint(&j, "schema_version", SCHEMA_VERSION);
    json_object_begin(&j, "volley");
    json_string(&j, "version", VOLLEY_VERSION);
    json_string(&j, "build", version_line());
    json_object_end(&j);
    json_string(&j, "start_time", units_utc_time(&r->started, date));
    /* to the microsecond, to see how closely the shards of a run started */
    json_uint(&j, "start_time_us",
              (uint64_t)r->started.tv_sec * 1000000 + (uint64_t)r->started.tv_nsec / 1000);
    if (r->start_late_known)
        json_uint(&j, "start_late_us", r->start_late_us);
    else
        json_null(&j, "start_late_us");
    spec_json(&j, r->spec, r->pipeline);
    shard(&j, r->spec);
    inputs(&j, r);

    json_uint(&j, "duration_us", r->runtime_us);
    counters(&j, s, STATS_AT_TOTALS, seconds);
    json_object_begin(&j, "throughput");
    json_double(&j, "requests_per_sec", seconds > 0 ? (double)s->requests / seconds : 0);
    json_double(&j, "bytes_per_sec", seconds > 0 ? (double)s->bytes / seconds : 0);
    json_object_end(&j);
    success(&j, s);
    errors(&j, s);
    status_codes(&j, s);
    counters(&j, s, STATS_AT_CONNECTIONS, seconds);
    sources(&j, r);
    place_object(&j, s, STATS_AT_TLS, r->spec->tls);
    place_object(&j, s, STATS_AT_PROXY, r->spec->proxy != NULL);
    protocols(&j, s);
    place_object(&j, s, STATS_AT_HTTP2, spec_offers_figures(r->spec, STATS_AT_HTTP2));
    place_object(&j, s, STATS_AT_HTTP3, spec_offers_figures(r->spec, STATS_AT_HTTP3));
    distributions(&j, r);
    rate(&j, r, seconds);
    cpu(&j, r);
    if (r->timeline) {
        timeline_json(&j, r->timeline, s->requests);
    } else {
        json_null(&j, "intervals");
        json_null(&j, "server");
    }
    warmup(&j, r);
    metrics_json(&j, r->metrics);
    threshold_json(&j, r->verdicts, r->nverdicts, r->aborted);
    json_object_begin(&j, "end");
    run_end_json(&j, &r->end);
    json_object_end(&j);
    json_object_end(&j);
    return json_finish(&j);
}
