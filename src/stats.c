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
    [CAUSE_QUIC_CLOSE] = "connection_close",
    [CAUSE_QUIC_IDLE_TIMEOUT] = "idle_timeout",
    [CAUSE_QUIC_STATELESS_RESET] = "stateless_reset",
    [CAUSE_QUIC_VERSION] = "version_negotiation",
    [CAUSE_QUIC_PROTOCOL] = "quic_protocol",
    [CAUSE_H3_PROTOCOL] = "http3_protocol",
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

static void add(uint64_t *dst, const uint64_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

static void h3_merge(struct h3_stats *dst, const struct h3_stats *src)
{
    if (src->settings && (!dst->settings || src->streams < dst->streams))
        dst->streams = src->streams;
    if (src->min_rtt_us && (!dst->min_rtt_us || src->min_rtt_us < dst->min_rtt_us))
        dst->min_rtt_us = src->min_rtt_us;
    dst->settings += src->settings;
    dst->refused += src->refused;
    dst->goaways += src->goaways;
    dst->packets_sent += src->packets_sent;
    dst->packets_received += src->packets_received;
    dst->lost += src->lost;
    dst->ended += src->ended;
    dst->rtt_us += src->rtt_us;
    dst->cwnd += src->cwnd;
    dst->early_attempts += src->early_attempts;
    dst->early_accepted += src->early_accepted;
    dst->early_rejected += src->early_rejected;
    dst->early_requests += src->early_requests;
    dst->stateless_resets += src->stateless_resets;
    dst->version_negotiations += src->version_negotiations;
    dst->idle_timeouts += src->idle_timeouts;
    add(dst->ecn_received, src->ecn_received, 4);
    add(dst->alerts, src->alerts, 256);
    add(dst->close_transport, src->close_transport, STATS_QUIC_CODES);
    add(dst->close_application, src->close_application, STATS_H3_CODES);
    add(dst->resets, src->resets, STATS_H3_CODES);
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
    for (int i = 0; i < STATS_STATUS_MAX; i++)
        dst->status[i] += src->status[i];
    dst->h2.goaways += src->h2.goaways;
    dst->h2.refused += src->h2.refused;
    for (int i = 0; i < STATS_H2_CODES; i++)
        dst->h2.resets[i] += src->h2.resets[i];
    if (src->h2.settings && (!dst->h2.settings || src->h2.streams < dst->h2.streams))
        dst->h2.streams = src->h2.streams;
    dst->h2.settings += src->h2.settings;
    h3_merge(&dst->h3, &src->h3);
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

const char *stats_h2_code_name(unsigned code)
{
    return h2_code_names[code < STATS_H2_CODES ? code : STATS_H2_CODES - 1];
}

static const char *const h3_code_names[STATS_H3_CODES] = {
    "H3_NO_ERROR",
    "H3_GENERAL_PROTOCOL_ERROR",
    "H3_INTERNAL_ERROR",
    "H3_STREAM_CREATION_ERROR",
    "H3_CLOSED_CRITICAL_STREAM",
    "H3_FRAME_UNEXPECTED",
    "H3_FRAME_ERROR",
    "H3_EXCESSIVE_LOAD",
    "H3_ID_ERROR",
    "H3_SETTINGS_ERROR",
    "H3_MISSING_SETTINGS",
    "H3_REQUEST_REJECTED",
    "H3_REQUEST_CANCELLED",
    "H3_REQUEST_INCOMPLETE",
    "H3_MESSAGE_ERROR",
    "H3_CONNECT_ERROR",
    "H3_VERSION_FALLBACK",
    "OTHER",
};

static const char *const quic_code_names[STATS_QUIC_CODES] = {
    "NO_ERROR",
    "INTERNAL_ERROR",
    "CONNECTION_REFUSED",
    "FLOW_CONTROL_ERROR",
    "STREAM_LIMIT_ERROR",
    "STREAM_STATE_ERROR",
    "FINAL_SIZE_ERROR",
    "FRAME_ENCODING_ERROR",
    "TRANSPORT_PARAMETER_ERROR",
    "CONNECTION_ID_LIMIT_ERROR",
    "PROTOCOL_VIOLATION",
    "INVALID_TOKEN",
    "APPLICATION_ERROR",
    "CRYPTO_BUFFER_EXCEEDED",
    "KEY_UPDATE_ERROR",
    "AEAD_LIMIT_REACHED",
    "NO_VIABLE_PATH",
    "OTHER",
};

const char *stats_h3_code_name(unsigned i)
{
    return h3_code_names[i < STATS_H3_CODES ? i : STATS_H3_CODES - 1];
}

const char *stats_quic_code_name(unsigned i)
{
    return quic_code_names[i < STATS_QUIC_CODES ? i : STATS_QUIC_CODES - 1];
}
