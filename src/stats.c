/* Per-worker measurements and their merge after the threads are joined.
 * SPDX-License-Identifier: MIT */
#include "stats.h"

#include <string.h>

static const char *const cause_names[CAUSE_COUNT] = {
    [CAUSE_REFUSED] = "refused",
    [CAUSE_UNREACHABLE] = "unreachable",
    [CAUSE_CONNECT_TIMEOUT] = "connect_timeout",
    [CAUSE_FD_LIMIT] = "fd_limit",
    [CAUSE_CONNECT_OTHER] = "connect_other",
    [CAUSE_TLS_HANDSHAKE] = "tls_handshake",
    [CAUSE_RESET] = "reset",
    [CAUSE_CLOSED] = "closed",
    [CAUSE_TRUNCATED] = "truncated",
    [CAUSE_PARSE] = "parse_error",
    [CAUSE_HEAD_TOO_LARGE] = "header_too_large",
    [CAUSE_UNEXPECTED] = "unexpected_data",
    [CAUSE_READ_OTHER] = "read_other",
    [CAUSE_BROKEN_PIPE] = "broken_pipe",
    [CAUSE_WRITE_OTHER] = "write_other",
    [CAUSE_RESPONSE_TIMEOUT] = "response_timeout",
    [CAUSE_GOAWAY] = "goaway",
    [CAUSE_STREAM_RESET] = "stream_reset",
    [CAUSE_H2_PROTOCOL] = "http2_protocol",
    [CAUSE_H2_FLOOD] = "http2_flood",
    [CAUSE_FLOW_CONTROL] = "flow_control",
    [CAUSE_SETTINGS_TIMEOUT] = "settings_timeout",
    [CAUSE_STREAM_LIMIT] = "stream_limit",
    [CAUSE_REFUSED_STREAM] = "refused_stream",
    [CAUSE_REQUEST_TOO_LARGE] = "request_too_large",
};

static const char *const tls_failure_names[TLS_FAIL_COUNT] = {
    [TLS_FAIL_PROTOCOL_VERSION] = "protocol_version",
    [TLS_FAIL_NOT_TLS] = "not_tls",
    [TLS_FAIL_HANDSHAKE] = "handshake_failure",
    [TLS_FAIL_CERT_REQUIRED] = "certificate_required",
    [TLS_FAIL_CERT_REFUSED] = "certificate_refused",
    [TLS_FAIL_CERT_VERIFY] = "certificate_verify",
    [TLS_FAIL_NO_ALPN] = "no_application_protocol",
    [TLS_FAIL_OTHER_ALERT] = "other_alert",
    [TLS_FAIL_CLOSED] = "closed",
    [TLS_FAIL_OTHER] = "other",
};

static const char *const h2_code_names[STATS_H2_CODES] = {
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
    "OTHER",
};

void stats_init(struct stats *s)
{
    memset(s, 0, sizeof *s);
    s->latency = hist_new(STATS_LATENCY_MAX);
    s->u_latency = hist_new(STATS_LATENCY_MAX);
    s->lag = hist_new(STATS_LATENCY_MAX);
    s->connect = hist_new(STATS_LATENCY_MAX);
    s->rps = hist_new(STATS_RPS_MAX);
}

void stats_free(struct stats *s)
{
    hist_free(s->latency);
    hist_free(s->u_latency);
    hist_free(s->lag);
    hist_free(s->connect);
    hist_free(s->rps);
    memset(s, 0, sizeof *s);
}

void stats_merge(struct stats *dst, const struct stats *src)
{
    dst->requests += src->requests;
    dst->sent += src->sent;
    dst->bytes += src->bytes;
    dst->connects += src->connects;
    dst->reopened += src->reopened;
    dst->reconnects += src->reconnects;
    dst->handshakes += src->handshakes;
    dst->resumed += src->resumed;
    dst->handshake_us += src->handshake_us;
    dst->pauses += src->pauses;
    dst->paused_us += src->paused_us;
    errors_add(&dst->errors, &src->errors);
    for (int i = 0; i < CAUSE_COUNT; i++)
        dst->causes[i] += src->causes[i];
    for (int i = 0; i < TLS_FAIL_COUNT; i++)
        dst->tls_failures[i] += src->tls_failures[i];
    for (int i = 0; i < STATS_STATUS_MAX; i++)
        dst->status[i] += src->status[i];
    dst->h2.goaways += src->h2.goaways;
    dst->h2.refused += src->h2.refused;
    for (int i = 0; i < STATS_H2_CODES; i++)
        dst->h2.resets[i] += src->h2.resets[i];
    if (src->h2.settings && (!dst->h2.settings || src->h2.streams < dst->h2.streams))
        dst->h2.streams = src->h2.streams;
    dst->h2.settings += src->h2.settings;
    hist_merge(dst->latency, src->latency);
    hist_merge(dst->u_latency, src->u_latency);
    hist_merge(dst->lag, src->lag);
    hist_merge(dst->connect, src->connect);
    hist_merge(dst->rps, src->rps);
}

void stats_reset(struct stats *s)
{
    struct stats kept = *s;
    memset(s, 0, sizeof *s);
    s->latency = kept.latency;
    s->u_latency = kept.u_latency;
    s->lag = kept.lag;
    s->connect = kept.connect;
    s->rps = kept.rps;
    hist_reset(s->latency);
    hist_reset(s->u_latency);
    hist_reset(s->lag);
    hist_reset(s->connect);
    hist_reset(s->rps);
}

uint64_t stats_errors(const struct stats *s)
{
    const struct errors *e = &s->errors;
    return e->connect + e->read + e->write + e->timeout + e->status;
}

const char *stats_cause_name(enum cause c) { return cause_names[c]; }

const char *stats_tls_failure_name(enum tls_failure f) { return tls_failure_names[f]; }

const char *stats_h2_code_name(unsigned code)
{
    return h2_code_names[code < STATS_H2_CODES ? code : STATS_H2_CODES - 1];
}
