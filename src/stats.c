/* Per-worker measurements and their merge after the threads are joined.
 * SPDX-License-Identifier: MIT */
#include "stats.h"

#include <stddef.h>
#include <stdio.h>
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
    [CAUSE_QUIC_CLOSE] = "connection_close",
    [CAUSE_QUIC_IDLE_TIMEOUT] = "idle_timeout",
    [CAUSE_QUIC_STATELESS_RESET] = "stateless_reset",
    [CAUSE_QUIC_VERSION] = "version_negotiation",
    [CAUSE_QUIC_PROTOCOL] = "quic_protocol",
    [CAUSE_H3_PROTOCOL] = "http3_protocol",
    [CAUSE_NO_PORT] = "no_free_port",
    [CAUSE_BIND_ADDRESS] = "bind_address",
    [CAUSE_PROXY_REFUSED] = "proxy_refused",
    [CAUSE_PROXY_CLOSED] = "proxy_closed",
    [CAUSE_PROXY_PROTOCOL] = "proxy_protocol",
    [CAUSE_PROXY_AUTH] = "proxy_auth",
    [CAUSE_PROXY_STATUS] = "proxy_connect_status",
    [CAUSE_SOCKS_FAILURE] = "socks_general_failure",
    [CAUSE_SOCKS_NOT_ALLOWED] = "socks_not_allowed",
    [CAUSE_SOCKS_NETWORK_UNREACHABLE] = "socks_network_unreachable",
    [CAUSE_SOCKS_HOST_UNREACHABLE] = "socks_host_unreachable",
    [CAUSE_SOCKS_REFUSED] = "socks_connection_refused",
    [CAUSE_SOCKS_TTL_EXPIRED] = "socks_ttl_expired",
    [CAUSE_SOCKS_COMMAND] = "socks_command_not_supported",
    [CAUSE_SOCKS_ADDRESS_TYPE] = "socks_address_type_not_supported",
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

static const char *const ecn_names[STATS_ECN_MARKS] = {"not_ect", "ect1", "ect0", "ce"};

const struct stats_counter stats_counters[STATS_NCOUNTERS] = {
#define STATS_COUNTER_ROW(f, place, key, column, metric, rule, flags)                              \
    {key, offsetof(struct stats, f), place, key, column, metric, rule, flags},
    STATS_COUNTERS(STATS_COUNTER_ROW)
#undef STATS_COUNTER_ROW
#define STATS_ERROR_ROW(name, what)                                                                \
    {what,                                                                                         \
     offsetof(struct stats, errors.name),                                                          \
     STATS_AT_ERRORS,                                                                              \
     #name,                                                                                        \
     #name,                                                                                        \
     "errors_by_class_total",                                                                      \
     STATS_SUM,                                                                                    \
     0},
        STATS_ERRORS(STATS_ERROR_ROW)
#undef STATS_ERROR_ROW
};

const struct stats_breakdown stats_breakdowns[STATS_NBREAKDOWNS] = {
#define STATS_BREAKDOWN_ROW(f, n, place, key, name)                                                \
    {offsetof(struct stats, f), n, place, key, name},
    STATS_BREAKDOWNS(STATS_BREAKDOWN_ROW)
#undef STATS_BREAKDOWN_ROW
};

const struct stats_dist stats_dists[STATS_NDISTS] = {
#define STATS_DIST_ROW(f, key, column, metric, highest, flags)                                     \
    {offsetof(struct stats, f), key, column, metric, highest, flags},
    STATS_DISTRIBUTIONS(STATS_DIST_ROW)
#undef STATS_DIST_ROW
};

const char *stats_place_object(enum stats_place place)
{
    switch (place) {
    case STATS_AT_ERRORS:
        return "errors";
    case STATS_AT_TLS:
        return "tls";
    case STATS_AT_PROXY:
        return "proxy";
    case STATS_AT_HTTP2:
        return "http2";
    case STATS_AT_HTTP3:
        return "http3";
    case STATS_AT_RATE:
        return "rate";
    default:
        return NULL;
    }
}

uint32_t stats_dists_measured(bool open_model)
{
    uint32_t mask = 0;
    for (size_t i = 0; i < stats_ndists; i++)
        if (open_model || !(stats_dists[i].flags & STATS_OPEN))
            mask |= 1u << i;
    return mask;
}

void stats_list_fields(FILE *f)
{
    for (size_t i = 0; i < stats_ncounters; i++) {
        const struct stats_counter *c = &stats_counters[i];
        const char *object = stats_place_object(c->place);
        if (c->place == STATS_AT_NONE)
            continue;
        fprintf(f, "counter %s%s%s ", object ? object : "", object ? "." : "", c->key);
        if (!c->column)
            fputs("-", f);
        else if (c->place == STATS_AT_ERRORS)
            fprintf(f, "errors.%s", c->column);
        else
            fputs(c->column, f);
        fprintf(f, " %s %s\n", c->rule == STATS_SUM ? "sum" : "min",
                c->flags & STATS_PER_SEC ? "per_sec"
                : c->flags & STATS_MEAN  ? "mean"
                                         : "count");
    }
    for (size_t i = 0; i < stats_nbreakdowns; i++) {
        const struct stats_breakdown *b = &stats_breakdowns[i];
        const char *object = stats_place_object(b->place);
        fprintf(f, "breakdown %s%s%s - sum\n", object ? object : "", object ? "." : "", b->key);
    }
    for (size_t i = 0; i < stats_ndists; i++)
        fprintf(f, "distribution %s %s histogram\n", stats_dists[i].key,
                stats_dists[i].column ? stats_dists[i].column : "-");
}

/* What a counter of no part holds: 0 for a sum, UINT64_MAX for a minimum. */
static void counters_clear(struct stats *s)
{
    for (size_t i = 0; i < stats_ncounters; i++)
        if (stats_counters[i].rule == STATS_MIN)
            *stats_counter_at(s, &stats_counters[i]) = UINT64_MAX;
}

static struct hist **dist_at(struct stats *s, const struct stats_dist *d)
{
    return (struct hist **)(void *)((char *)s + d->offset);
}

void stats_init(struct stats *s)
{
    memset(s, 0, sizeof *s);
    counters_clear(s);
    for (size_t i = 0; i < stats_ndists; i++)
        *dist_at(s, &stats_dists[i]) = hist_new(stats_dists[i].highest);
}

void stats_free(struct stats *s)
{
    for (size_t i = 0; i < stats_ndists; i++)
        hist_free(*dist_at(s, &stats_dists[i]));
    memset(s, 0, sizeof *s);
}

void stats_merge(struct stats *dst, const struct stats *src)
{
    for (size_t i = 0; i < stats_ncounters; i++) {
        const struct stats_counter *c = &stats_counters[i];
        uint64_t *d = stats_counter_at(dst, c), v = stats_counter_get(src, c);
        if (c->rule == STATS_SUM)
            *d += v;
        else if (v < *d)
            *d = v;
    }
#define STATS_BREAKDOWN_ADD(field, n, place, key, name)                                            \
    for (size_t i = 0; i < (n); i++)                                                               \
        dst->field[i] += src->field[i];
    STATS_BREAKDOWNS(STATS_BREAKDOWN_ADD)
#undef STATS_BREAKDOWN_ADD
    for (size_t i = 0; i < stats_ndists; i++)
        hist_merge(stats_dist_get(dst, &stats_dists[i]), stats_dist_get(src, &stats_dists[i]));
}

static bool sum_overflows(uint64_t a, uint64_t b) { return a + b < a; }

bool stats_merge_overflows(const struct stats *dst, const struct stats *src)
{
    uint64_t d_socket = 0, s_socket = 0;
    for (size_t i = 0; i < stats_ncounters; i++) {
        const struct stats_counter *c = &stats_counters[i];
        if (c->rule == STATS_SUM &&
            sum_overflows(stats_counter_get(dst, c), stats_counter_get(src, c)))
            return true;
    }
#define STATS_BREAKDOWN_OVERFLOWS(field, n, place, key, name)                                      \
    for (size_t i = 0; i < (n); i++)                                                               \
        if (sum_overflows(dst->field[i], src->field[i]))                                           \
            return true;
    STATS_BREAKDOWNS(STATS_BREAKDOWN_OVERFLOWS)
#undef STATS_BREAKDOWN_OVERFLOWS
    for (size_t i = 0; i < stats_ndists; i++)
        if (sum_overflows(hist_count(stats_dist_get(dst, &stats_dists[i])),
                          hist_count(stats_dist_get(src, &stats_dists[i]))))
            return true;
    d_socket = dst->errors.connect + dst->errors.read + dst->errors.write + dst->errors.timeout;
    s_socket = src->errors.connect + src->errors.read + src->errors.write + src->errors.timeout;
    return sum_overflows(d_socket, s_socket);
}

void stats_reset(struct stats *s)
{
    struct hist *kept[STATS_NDISTS];
    for (size_t i = 0; i < stats_ndists; i++)
        kept[i] = *dist_at(s, &stats_dists[i]);
    memset(s, 0, sizeof *s);
    counters_clear(s);
    for (size_t i = 0; i < stats_ndists; i++) {
        hist_reset(kept[i]);
        *dist_at(s, &stats_dists[i]) = kept[i];
    }
}

uint64_t stats_errors(const struct stats *s)
{
    const struct errors *e = &s->errors;
    return e->connect + e->read + e->write + e->timeout + e->status;
}

const char *stats_cause_name(enum cause c) { return cause_names[c]; }

const char *stats_tls_failure_name(enum tls_failure f) { return tls_failure_names[f]; }

enum tls_failure stats_tls_alert_failure(unsigned alert)
{
    switch (alert) {
    case 70: /* protocol_version */
        return TLS_FAIL_PROTOCOL_VERSION;
    case 40: /* handshake_failure */
    case 71: /* insufficient_security */
        return TLS_FAIL_HANDSHAKE;
    case 116: /* certificate_required */
        return TLS_FAIL_CERT_REQUIRED;
    case 42: /* bad_certificate */
    case 43: /* unsupported_certificate */
    case 44: /* certificate_revoked */
    case 45: /* certificate_expired */
    case 46: /* certificate_unknown */
    case 48: /* unknown_ca */
    case 49: /* access_denied */
        return TLS_FAIL_CERT_REFUSED;
    case 120: /* no_application_protocol */
        return TLS_FAIL_NO_ALPN;
    default:
        return TLS_FAIL_OTHER_ALERT;
    }
}

const char *stats_h2_code_name(unsigned code, char *buf)
{
    (void)buf;
    return h2_code_names[code < STATS_H2_CODES ? code : STATS_H2_CODES - 1];
}

const char *stats_h3_code_name(unsigned code, char *buf)
{
    (void)buf;
    return h3_code_names[code < STATS_H3_CODES ? code : STATS_H3_CODES - 1];
}

const char *stats_quic_code_name(unsigned code, char *buf)
{
    (void)buf;
    return quic_code_names[code < STATS_QUIC_CODES ? code : STATS_QUIC_CODES - 1];
}

const char *stats_alert_name(unsigned code, char *buf)
{
    snprintf(buf, STATS_CODE_NAME_MAX, "%u", code);
    return buf;
}

const char *stats_status_name(unsigned code, char *buf)
{
    if (code == 0 || code >= STATS_STATUS_MAX)
        return "other";
    snprintf(buf, STATS_CODE_NAME_MAX, "%u", code % STATS_STATUS_MAX);
    return buf;
}

const char *stats_ecn_name(unsigned code, char *buf)
{
    (void)buf;
    return ecn_names[code & (STATS_ECN_MARKS - 1)];
}
