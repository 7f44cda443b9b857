/* The machine-readable report: one JSON document per run, in the versioned
 * schema described in docs/json.md. Times are microseconds unless a field's
 * name says otherwise; every field is always present (null when it does not
 * apply), so consumers need no existence checks.
 * SPDX-License-Identifier: MIT */
#include "report.h"

#include <math.h>
#include <stdlib.h>

#include "cli.h"
#include "json.h"
#include "threshold.h"
#include "timeline.h"
#include "units.h"
#include "version.h"

/* Bump when a field changes meaning or disappears; adding fields does not. */
#define SCHEMA_VERSION 1

static const double percentiles[] = {50, 75, 90, 99, 99.9, 99.99, 99.999, 100};

/* --stages as given; rate is then their mean target, and stages_from the
 * rate they start from. */
static void stages(struct json *j, const struct config *cfg)
{
    if (!cfg->nstages) {
        json_null(j, "stages");
        json_null(j, "stages_from");
        return;
    }
    json_array_begin(j, "stages");
    for (size_t i = 0; i < cfg->nstages; i++) {
        json_object_begin(j, NULL);
        json_uint(j, "duration_us", cfg->stages[i].duration_us);
        json_uint(j, "rate", cfg->stages[i].rate);
        json_object_end(j);
    }
    json_array_end(j);
    json_uint(j, "stages_from", cfg->stages_from);
}

static void options(struct json *j, const struct result *r)
{
    const struct config *cfg = r->cfg;
    json_object_begin(j, "options");
    json_string(j, "url", cfg->url_arg);
    json_uint(j, "threads", cfg->threads);
    json_uint(j, "connections", cfg->connections);
    json_uint_or_null(j, "duration_us", cfg->time_limit_us);
    json_uint(j, "timeout_us", cfg->timeout_us);
    json_uint_or_null(j, "rate", cfg->rate);
    json_uint_or_null(j, "requests", cfg->requests);
    stages(j, cfg);
    json_uint_or_null(j, "ramp_up_us", cfg->ramp_up_us);
    json_uint_or_null(j, "warmup_us", cfg->warmup_us);
    json_uint(j, "pipeline", r->pipeline);
    json_string(j, "protocol", cfg->http3 ? "HTTP/3" : cfg->http2 ? "HTTP/2" : "HTTP/1.1");
    json_uint(j, "streams", cfg->streams);
    json_bool(j, "keepalive", !cfg->no_keepalive);
    json_string(j, "unix_socket", cfg->unix_socket);
    json_string(j, "script", cfg->script);
    json_array_begin(j, "script_args");
    for (size_t i = 0; i < cfg->nscript_args; i++)
        json_string(j, NULL, cfg->script_args[i]);
    json_array_end(j);
    json_array_begin(j, "headers");
    for (size_t i = 0; i < cfg->nheaders; i++) {
        json_array_begin(j, NULL);
        json_string(j, NULL, cfg->headers[i].name);
        json_string(j, NULL, cfg->headers[i].value);
        json_array_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

/* A share of -R is an exact fraction; whole rates stay integers. */
static void rate_number(struct json *j, const char *key, double v)
{
    if (v == floor(v) && v < 0x1p64)
        json_uint(j, key, (uint64_t)v);
    else
        json_double(j, key, v);
}

/* This process's part of a sharded run; null for a whole run. */
static void shard(struct json *j, const struct config *cfg)
{
    const struct shard *s = &cfg->shard;
    if (!s->count) {
        json_null(j, "shard");
        return;
    }
    json_object_begin(j, "shard");
    json_uint(j, "index", s->index);
    json_uint(j, "count", s->count);
    json_uint(j, "connections", s->connections);
    if (cfg->rate)
        rate_number(j, "rate", s->rate);
    else
        json_null(j, "rate");
    if (cfg->requests)
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

/* A latency distribution: moments, HdrHistogram's percentiles (the values
 * any HdrHistogram library finds in hdr_histogram) and the histogram. */
static void distribution(struct json *j, const char *key, const struct hist *h)
{
    char name[16];
    if (!h) {
        json_null(j, key);
        return;
    }
    json_object_begin(j, key);
    moments(j, h);
    json_object_begin(j, "percentiles");
    for (size_t i = 0; i < sizeof percentiles / sizeof percentiles[0]; i++) {
        snprintf(name, sizeof name, "%g", percentiles[i]);
        if (hist_count(h))
            json_uint(j, name, hist_value_at_percentile(h, percentiles[i]));
        else
            json_null(j, name);
    }
    json_object_end(j);
    char *encoded = hist_encode(h);
    json_string(j, "hdr_histogram", encoded);
    free(encoded);
    json_object_end(j);
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
    const struct errors *e = &s->errors;
    json_object_begin(j, "errors");
    json_uint(j, "connect", e->connect);
    json_uint(j, "read", e->read);
    json_uint(j, "write", e->write);
    json_uint(j, "timeout", e->timeout);
    json_uint(j, "status", e->status);
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
    if (!r->cfg->rate) {
        json_null(j, "rate");
        return;
    }
    json_object_begin(j, "rate");
    rate_number(j, "target", r->cfg->shard.rate);
    json_double(j, "achieved", seconds > 0 ? (double)r->stats.requests / seconds : 0);
    json_double(j, "sent", seconds > 0 ? (double)r->stats.sent / seconds : 0);
    json_object_end(j);
}

/* Handshake figures for https URLs; latency never includes them. */
static void tls(struct json *j, const struct result *r)
{
    const struct stats *s = &r->stats;
    if (!r->cfg->url.tls) {
        json_null(j, "tls");
        return;
    }
    json_object_begin(j, "tls");
    json_uint(j, "handshakes", s->handshakes);
    json_uint(j, "resumed", s->resumed);
    if (s->handshakes)
        json_double(j, "handshake_mean_us", (double)s->handshake_us / (double)s->handshakes);
    else
        json_null(j, "handshake_mean_us");
    json_object_end(j);
}

/* What an HTTP/2 run saw of the protocol itself. */
static void http2(struct json *j, const struct result *r)
{
    const struct h2_stats *h2 = &r->stats.h2;
    if (!r->cfg->http2) {
        json_null(j, "http2");
        return;
    }
    json_object_begin(j, "http2");
    if (h2->settings)
        json_uint(j, "streams", h2->streams);
    else
        json_null(j, "streams");
    json_uint(j, "goaway_received", h2->goaways);
    json_uint(j, "refused", h2->refused);
    json_object_begin(j, "rst_stream_received");
    for (unsigned code = 0; code < STATS_H2_CODES; code++)
        if (h2->resets[code])
            json_uint(j, stats_h2_code_name(code), h2->resets[code]);
    json_object_end(j);
    json_object_end(j);
}

/* Counters by code name, those that are not 0. */
static void codes(struct json *j, const char *key, const uint64_t *counts, unsigned n,
                  const char *(*name)(unsigned))
{
    json_object_begin(j, key);
    for (unsigned i = 0; i < n; i++)
        if (counts[i])
            json_uint(j, name(i), counts[i]);
    json_object_end(j);
}

static void early_data(struct json *j, const struct h3_stats *h3)
{
    json_object_begin(j, "early_data");
    json_uint(j, "attempted", h3->early_attempts);
    json_uint(j, "accepted", h3->early_accepted);
    json_uint(j, "rejected", h3->early_rejected);
    json_uint(j, "requests", h3->early_requests);
    json_object_end(j);
}

/* QUIC's figures at the end of each connection: its RTT and congestion
 * window, as means over the connections. */
static void quic_ends(struct json *j, const struct h3_stats *h3)
{
    json_uint(j, "connections_measured", h3->ended);
    json_object_begin(j, "rtt_us");
    if (h3->ended)
        json_double(j, "smoothed_mean", (double)h3->rtt_us / (double)h3->ended);
    else
        json_null(j, "smoothed_mean");
    json_uint_or_null(j, "min", h3->min_rtt_us);
    json_object_end(j);
    if (h3->ended)
        json_double(j, "cwnd_mean_bytes", (double)h3->cwnd / (double)h3->ended);
    else
        json_null(j, "cwnd_mean_bytes");
}

/* --ecn: the datagrams received, by their ECN marks. */
static void ecn(struct json *j, const struct result *r)
{
    static const char *const names[4] = {"not_ect", "ect1", "ect0", "ce"};
    if (!r->cfg->ecn) {
        json_null(j, "ecn_received");
        return;
    }
    json_object_begin(j, "ecn_received");
    for (int i = 0; i < 4; i++)
        json_uint(j, names[i], r->stats.h3.ecn_received[i]);
    json_object_end(j);
}

/* By alert number (RFC 8446 §6), as status codes are keyed. */
static void alerts(struct json *j, const uint64_t *counts)
{
    json_object_begin(j, "handshake_alerts");
    for (unsigned alert = 0; alert < 256; alert++) {
        char key[4];
        if (!counts[alert])
            continue;
        snprintf(key, sizeof key, "%u", alert);
        json_uint(j, key, counts[alert]);
    }
    json_object_end(j);
}

/* What an HTTP/3 run saw of the protocol and of QUIC. */
static void http3(struct json *j, const struct result *r)
{
    const struct h3_stats *h3 = &r->stats.h3;
    if (!r->cfg->http3) {
        json_null(j, "http3");
        return;
    }
    json_object_begin(j, "http3");
    if (h3->settings)
        json_uint(j, "streams", h3->streams);
    else
        json_null(j, "streams");
    json_uint(j, "goaway_received", h3->goaways);
    json_uint(j, "refused", h3->refused);
    codes(j, "stream_reset_received", h3->resets, STATS_H3_CODES, stats_h3_code_name);
    json_uint(j, "packets_sent", h3->packets_sent);
    json_uint(j, "packets_received", h3->packets_received);
    json_uint(j, "packets_lost", h3->lost);
    quic_ends(j, h3);
    early_data(j, h3);
    ecn(j, r);
    json_uint(j, "stateless_resets", h3->stateless_resets);
    json_uint(j, "idle_timeouts", h3->idle_timeouts);
    json_uint(j, "version_negotiations", h3->version_negotiations);
    alerts(j, h3->alerts);
    json_object_begin(j, "connection_close_received");
    codes(j, "transport", h3->close_transport, STATS_QUIC_CODES, stats_quic_code_name);
    codes(j, "application", h3->close_application, STATS_H3_CODES, stats_h3_code_name);
    json_object_end(j);
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
    json_uint(j, "duration_us", r->cfg->warmup_us);
    json_uint(j, "requests", s->requests);
    json_uint(j, "sent", s->sent);
    json_uint(j, "bytes", s->bytes);
    json_uint(j, "connects", s->connects);
    errors(j, s);
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
    options(&j, r);
    shard(&j, r->cfg);
    inputs(&j, r);

    json_uint(&j, "duration_us", r->runtime_us);
    json_uint(&j, "requests", s->requests);
    json_uint(&j, "bytes", s->bytes);
    json_object_begin(&j, "throughput");
    json_double(&j, "requests_per_sec", seconds > 0 ? (double)s->requests / seconds : 0);
    json_double(&j, "bytes_per_sec", seconds > 0 ? (double)s->bytes / seconds : 0);
    json_object_end(&j);
    success(&j, s);
    errors(&j, s);
    status_codes(&j, s);
    json_uint(&j, "connects", s->connects);
    json_uint(&j, "reopened", s->reopened);
    json_uint(&j, "reconnects", s->reconnects);
    tls(&j, r);
    http2(&j, r);
    http3(&j, r);
    distribution(&j, "connect_time", s->connect);

    distribution(&j, "latency", s->latency);
    distribution(&j, "latency_uncorrected", r->latency_uncorrected);
    distribution(&j, "scheduling_lag", r->scheduling_lag);
    json_object_begin(&j, "requests_per_sec");
    moments(&j, s->rps);
    char *encoded = hist_encode(s->rps);
    json_string(&j, "hdr_histogram", encoded);
    free(encoded);
    json_object_end(&j);
    rate(&j, r, seconds);
    cpu(&j, r);
    if (r->timeline) {
        timeline_json(&j, r->timeline, s->requests);
    } else {
        json_null(&j, "intervals");
        json_null(&j, "server");
    }
    warmup(&j, r);
    threshold_json(&j, r->verdicts, r->nverdicts, r->aborted);
    json_object_end(&j);
    return json_finish(&j);
}
