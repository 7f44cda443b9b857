/* What one worker measured (and, after the run, all of them merged): counts,
 * error classes and causes, status codes and the histograms, each declared
 * once in the tables below (the schema of figures). Workers own theirs
 * exclusively while the run is on.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_STATS_H
#define VOLLEY_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"

/* Latency is tracked from 1 us to 24 h, as in wrk2. */
#define STATS_LATENCY_MAX (24ULL * 3600 * 1000000)
/* Req/Sec samples, per thread, as in wrk. */
#define STATS_RPS_MAX 10000000ULL
/* Status codes 0..999 are counted one by one. */
#define STATS_STATUS_MAX 1000

/* Why an error was counted, for the machine-readable output. */
enum cause {
    CAUSE_REFUSED,     /* connect: connection refused */
    CAUSE_UNREACHABLE, /* connect: network or host unreachable */
    CAUSE_CONNECT_TIMEOUT,
    CAUSE_FD_LIMIT, /* connect: out of file descriptors */
    CAUSE_CONNECT_OTHER,
    CAUSE_TLS_HANDSHAKE,
    CAUSE_RESET,     /* read/write: connection reset by peer */
    CAUSE_CLOSED,    /* read: closed with a request outstanding */
    CAUSE_TRUNCATED, /* read: closed in the middle of a response */
    CAUSE_PARSE,     /* read: malformed response */
    CAUSE_HEAD_TOO_LARGE,
    CAUSE_UNEXPECTED, /* read: response bytes with no request outstanding */
    CAUSE_READ_OTHER,
    CAUSE_BROKEN_PIPE, /* write: the peer had closed */
    CAUSE_WRITE_OTHER,
    CAUSE_RESPONSE_TIMEOUT,
    /* HTTP/2 */
    CAUSE_GOAWAY,            /* read: GOAWAY with an error code */
    CAUSE_STREAM_RESET,      /* read: RST_STREAM, any code but REFUSED_STREAM */
    CAUSE_H2_PROTOCOL,       /* read: the server broke the protocol, or garbage */
    CAUSE_H2_FLOOD,          /* read: more frames than a peer should send */
    CAUSE_FLOW_CONTROL,      /* read: a flow-control error; timeout: a stalled body */
    CAUSE_SETTINGS_TIMEOUT,  /* timeout: SETTINGS never acknowledged */
    CAUSE_STREAM_LIMIT,      /* timeout: no stream allowed to open */
    CAUSE_REFUSED_STREAM,    /* read: refused unprocessed every time it was sent again */
    CAUSE_REQUEST_TOO_LARGE, /* write: a header block over what nghttp2 sends */
    /* HTTP/3 and QUIC */
    CAUSE_QUIC_CLOSE,           /* read: CONNECTION_CLOSE with an error code */
    CAUSE_QUIC_IDLE_TIMEOUT,    /* timeout: no packet from the server for the idle timeout */
    CAUSE_QUIC_STATELESS_RESET, /* read: the server no longer knew the connection */
    CAUSE_QUIC_VERSION,         /* connect: version negotiation to no version volley has */
    CAUSE_QUIC_PROTOCOL,        /* read: the server broke QUIC */
    CAUSE_H3_PROTOCOL,          /* read: the server broke HTTP/3 */
    /* connect: source addresses and ports (--bind) */
    CAUSE_NO_PORT,      /* no free local port for another connection to the target */
    CAUSE_BIND_ADDRESS, /* the source address is not one of this machine's */
    /* connect: through a proxy (--proxy) */
    CAUSE_PROXY_REFUSED,  /* the proxy refused the connection */
    CAUSE_PROXY_CLOSED,   /* it closed the connection before the tunnel was up */
    CAUSE_PROXY_PROTOCOL, /* its answer was not HTTP/1.1 (or SOCKS5) */
    CAUSE_PROXY_AUTH,     /* it refused the credentials, or wanted some */
    CAUSE_PROXY_STATUS,   /* it answered CONNECT with another status than 2xx */
    /* the SOCKS5 reply codes (RFC 1928 §6) */
    CAUSE_SOCKS_FAILURE,
    CAUSE_SOCKS_NOT_ALLOWED,
    CAUSE_SOCKS_NETWORK_UNREACHABLE,
    CAUSE_SOCKS_HOST_UNREACHABLE,
    CAUSE_SOCKS_REFUSED,
    CAUSE_SOCKS_TTL_EXPIRED,
    CAUSE_SOCKS_COMMAND,
    CAUSE_SOCKS_ADDRESS_TYPE,
    CAUSE_COUNT
};

/* Why a TLS handshake failed: the tls_handshake cause in detail. */
enum tls_failure {
    TLS_FAIL_PROTOCOL_VERSION, /* no version in common: the server's is older than TLS 1.2 */
    TLS_FAIL_NOT_TLS,          /* the server answered, but not in TLS (a plain HTTP port) */
    TLS_FAIL_HANDSHAKE,        /* alert handshake_failure: no cipher suite, group or signature */
    TLS_FAIL_CERT_REQUIRED,    /* alert certificate_required: give a client certificate */
    TLS_FAIL_CERT_REFUSED,     /* an alert refusing the client certificate given */
    TLS_FAIL_CERT_VERIFY,      /* --verify: the server's certificate did not verify */
    TLS_FAIL_NO_ALPN,          /* alert no_application_protocol */
    TLS_FAIL_OTHER_ALERT,      /* another alert from the server */
    TLS_FAIL_CLOSED,           /* closed or reset without an alert */
    TLS_FAIL_OTHER,
    TLS_FAIL_COUNT
};

/* How volley merge adds up a counter of the parts of a run. */
enum stats_rule {
    STATS_SUM, /* the parts' add up */
    STATS_MIN, /* the smallest part's; UINT64_MAX (null where written) when none has one */
};

/* Where a counter sits in the --json document (docs/json.md), in the
 * document's order: beside requests and bytes, in the errors object,
 * beside connects, in tls (https runs), in proxy (runs through one), in
 * http2 or http3 (runs that may speak it), in rate (-R runs), or nowhere (it
 * only feeds other figures). A timeline record has its counters in the same
 * order. */
enum stats_place {
    STATS_AT_TOTALS,
    STATS_AT_ERRORS,
    STATS_AT_CONNECTIONS,
    STATS_AT_TLS,
    STATS_AT_PROXY,
    STATS_AT_HTTP2,
    STATS_AT_HTTP3,
    STATS_AT_RATE,
    STATS_AT_NONE,
};

/* How a figure is written (flags). */
#define STATS_PER_SEC 1u   /* as a rate over the run, or the interval: the key names the rate */
#define STATS_MEAN 2u      /* divided by its place's first counter; null when that is 0 */
#define STATS_OPEN 4u      /* measured only with -R: null without */
#define STATS_TL_RATE 8u   /* a timeline record gives KEY_per_sec too, right after it */
#define STATS_MOMENTS 16u  /* a distribution without percentiles: count, min, max, mean, stdev */
#define STATS_OPTIONAL 32u /* results of earlier versions may lack it (volley merge) */
#define STATS_PER_RESPONSE 64u /* one value per response: its count is requests */
#define STATS_MICROS 128u      /* a counter of microseconds: /metrics gives seconds */

/* The counters a run measures, one line each: the field of struct stats,
 * where it sits in the --json document and its key there, its key in a
 * --timeline record ("requests"; the CSV column is the same) or NULL, its
 * metric in /metrics and remote write (the name after "volley_", in
 * Prometheus' conventions: a counter ends in _total; a STATS_MIN figure is
 * a gauge) or NULL, how volley merge adds it up, and how it is written.
 * struct stats, stats_merge, the JSON, timeline and metrics writers, volley
 * merge's readers and checks, and the docs check all follow from this
 * table; docs/json.md describes each key it writes. The responses by
 * status and the errors by cause are families of their own in /metrics
 * (responses_total, errors_total), the error classes one labelled by
 * class. */
#define STATS_COUNTERS(X)                                                                          \
    /* complete responses, whatever their status */                                                \
    X(requests, STATS_AT_TOTALS, "requests", "requests", NULL, STATS_SUM, STATS_TL_RATE)           \
    /* bytes read, headers (and HTTP/2 framing) included */                                        \
    X(bytes, STATS_AT_TOTALS, "bytes", "bytes", "received_bytes_total", STATS_SUM, 0)              \
    /* connections established; of which not their slot's first; normal closes */                  \
    X(connects, STATS_AT_CONNECTIONS, "connects", "connects", "connections_opened_total",          \
      STATS_SUM, 0)                                                                                \
    X(reopened, STATS_AT_CONNECTIONS, "reopened", NULL, "connections_reopened_total", STATS_SUM,   \
      0)                                                                                           \
    X(reconnects, STATS_AT_CONNECTIONS, "reconnects", "reconnects", "reconnects_total", STATS_SUM, \
      0)                                                                                           \
    /* TLS handshakes completed; of which resumed a session; their time, TCP connect to done */    \
    X(handshakes, STATS_AT_TLS, "handshakes", NULL, "tls_handshakes_total", STATS_SUM, 0)          \
    X(resumed, STATS_AT_TLS, "resumed", NULL, "tls_resumed_total", STATS_SUM, 0)                   \
    X(handshake_us, STATS_AT_TLS, "handshake_mean_us", NULL, "tls_handshake_seconds_total",        \
      STATS_SUM, STATS_MEAN | STATS_MICROS)                                                        \
    /* tunnels set up through a proxy (CONNECT, SOCKS5); their time, TCP connect to done */        \
    X(tunnels, STATS_AT_PROXY, "tunnels", NULL, "proxy_tunnels_total", STATS_SUM, 0)               \
    X(tunnel_us, STATS_AT_PROXY, "tunnel_mean_us", NULL, "proxy_tunnel_seconds_total", STATS_SUM,  \
      STATS_MEAN | STATS_MICROS)                                                                   \
    /* HTTP/2: the fewest streams a connection could open; GOAWAYs; refused requests */            \
    X(h2_streams, STATS_AT_HTTP2, "streams", NULL, "http2_streams", STATS_MIN, 0)                  \
    X(h2_goaways, STATS_AT_HTTP2, "goaway_received", NULL, "http2_goaway_received_total",          \
      STATS_SUM, 0)                                                                                \
    X(h2_refused, STATS_AT_HTTP2, "refused", NULL, "http2_refused_total", STATS_SUM, 0)            \
    /* HTTP/3: connections whose QUIC figures were taken at their end; their \
     * smoothed RTT and congestion window then (means), the least RTT seen */                     \
    X(h3_ended, STATS_AT_HTTP3, "connections_measured", NULL, "http3_connections_measured_total",  \
      STATS_SUM, 0)                                                                                \
    X(h3_rtt_us, STATS_AT_HTTP3, "rtt_smoothed_mean_us", NULL, NULL, STATS_SUM, STATS_MEAN)        \
    X(h3_cwnd, STATS_AT_HTTP3, "cwnd_mean_bytes", NULL, NULL, STATS_SUM, STATS_MEAN)               \
    X(h3_min_rtt_us, STATS_AT_HTTP3, "rtt_min_us", NULL, NULL, STATS_MIN, 0)                       \
    /* HTTP/3: the fewest streams a connection could open; GOAWAYs; refused requests */            \
    X(h3_streams, STATS_AT_HTTP3, "streams", NULL, "http3_streams", STATS_MIN, 0)                  \
    X(h3_goaways, STATS_AT_HTTP3, "goaway_received", NULL, "http3_goaway_received_total",          \
      STATS_SUM, 0)                                                                                \
    X(h3_refused, STATS_AT_HTTP3, "refused", NULL, "http3_refused_total", STATS_SUM, 0)            \
    /* QUIC's packets, from ngtcp2's figures at each connection's end */                           \
    X(h3_packets_sent, STATS_AT_HTTP3, "packets_sent", NULL, "http3_packets_sent_total",           \
      STATS_SUM, 0)                                                                                \
    X(h3_packets_received, STATS_AT_HTTP3, "packets_received", NULL,                               \
      "http3_packets_received_total", STATS_SUM, 0)                                                \
    X(h3_lost, STATS_AT_HTTP3, "packets_lost", NULL, "http3_packets_lost_total", STATS_SUM, 0)     \
    /* --0rtt: handshakes that tried early data, and what the server said; requests sent early */  \
    X(h3_early_attempts, STATS_AT_HTTP3, "early_data_attempted", NULL,                             \
      "http3_early_data_attempted_total", STATS_SUM, 0)                                            \
    X(h3_early_accepted, STATS_AT_HTTP3, "early_data_accepted", NULL,                              \
      "http3_early_data_accepted_total", STATS_SUM, 0)                                             \
    X(h3_early_rejected, STATS_AT_HTTP3, "early_data_rejected", NULL,                              \
      "http3_early_data_rejected_total", STATS_SUM, 0)                                             \
    X(h3_early_requests, STATS_AT_HTTP3, "early_data_requests", NULL,                              \
      "http3_early_data_requests_total", STATS_SUM, 0)                                             \
    /* QUIC connections ended by a stateless reset, the idle timeout, version negotiation */       \
    X(h3_stateless_resets, STATS_AT_HTTP3, "stateless_resets", NULL,                               \
      "http3_stateless_resets_total", STATS_SUM, 0)                                                \
    X(h3_idle_timeouts, STATS_AT_HTTP3, "idle_timeouts", NULL, "http3_idle_timeouts_total",        \
      STATS_SUM, 0)                                                                                \
    X(h3_version_negotiations, STATS_AT_HTTP3, "version_negotiations", NULL,                       \
      "http3_version_negotiations_total", STATS_SUM, 0)                                            \
    /* -R: requests whose batch went out */                                                        \
    X(sent, STATS_AT_RATE, "sent", "sent_per_sec", "requests_sent_total", STATS_SUM,               \
      STATS_PER_SEC | STATS_OPEN)                                                                  \
    /* delay() pauses asked for, and their length; HTTP/2 SETTINGS received (not ACKs) */          \
    X(pauses, STATS_AT_NONE, "pauses", NULL, NULL, STATS_SUM, 0)                                   \
    X(paused_us, STATS_AT_NONE, "paused_us", NULL, NULL, STATS_SUM, 0)                             \
    X(h2_settings, STATS_AT_NONE, "h2_settings", NULL, NULL, STATS_SUM, 0)

/* wrk's error classes: the report's "Socket errors" line, and responses
 * with status >= 400. Each is a counter at STATS_AT_ERRORS, in the errors
 * object of the document and of each timeline record. */
#define STATS_ERRORS(X)                                                                            \
    X(connect, "connect errors")                                                                   \
    X(read, "read errors")                                                                         \
    X(write, "write errors")                                                                       \
    X(timeout, "timeouts")                                                                         \
    X(status, "status errors")

struct errors {
#define STATS_ERROR_MEMBER(name, what) uint64_t name;
    STATS_ERRORS(STATS_ERROR_MEMBER)
#undef STATS_ERROR_MEMBER
};

static inline void errors_add(struct errors *dst, const struct errors *src)
{
#define STATS_ERROR_ADD(name, what) dst->name += src->name;
    STATS_ERRORS(STATS_ERROR_ADD)
#undef STATS_ERROR_ADD
}

/* The distributions a run measures, one line each: the field of struct
 * stats, its key in the --json document, its key in a --timeline record
 * or NULL, its histogram in /metrics and remote write (the name after
 * "volley_"; values in us are given in seconds) or NULL, the largest value
 * it tracks, and flags (STATS_OPEN, STATS_MOMENTS, STATS_OPTIONAL,
 * STATS_PER_RESPONSE). volley merge adds them up bucket by bucket. */
#define STATS_DISTRIBUTIONS(X)                                                                     \
    /* connect time of each connection: TCP, a proxy's tunnel, the TLS handshake */                \
    X(connect, "connect_time", NULL, "connect_duration_seconds", STATS_LATENCY_MAX, 0)             \
    /* first byte written (-R: intended) to last read; -R: from the send; how late it went */      \
    X(latency, "latency", "latency", "request_duration_seconds", STATS_LATENCY_MAX,                \
      STATS_PER_RESPONSE)                                                                          \
    X(u_latency, "latency_uncorrected", "latency_uncorrected",                                     \
      "request_duration_uncorrected_seconds", STATS_LATENCY_MAX, STATS_OPEN | STATS_PER_RESPONSE)  \
    X(lag, "scheduling_lag", NULL, "scheduling_lag_seconds", STATS_LATENCY_MAX, STATS_OPEN)        \
    /* to the response's first byte, from where latency counts, and -R's from the send */          \
    X(ttfb, "ttfb", "ttfb", "ttfb_seconds", STATS_LATENCY_MAX,                                     \
      STATS_PER_RESPONSE | STATS_OPTIONAL)                                                         \
    X(u_ttfb, "ttfb_uncorrected", "ttfb_uncorrected", "ttfb_uncorrected_seconds",                  \
      STATS_LATENCY_MAX, STATS_OPEN | STATS_PER_RESPONSE | STATS_OPTIONAL)                         \
    /* Req/Sec, per thread, every 100 ms as wrk samples it */                                      \
    X(rps, "requests_per_sec", NULL, NULL, STATS_RPS_MAX, STATS_MOMENTS)

/* HTTP/2 error codes (RFC 9113 §7) are 0..0xd; others are counted as 0xe. */
#define STATS_H2_CODES 15
/* Room for the protocols a connection may speak (protocols.h's PROTOCOLS_COUNT). */
#define STATS_PROTOCOLS 4

/* QUIC transport error codes 0x0..0x10 (RFC 9000 §20.1) are counted one by
 * one, others as the last; so are HTTP/3's 0x100..0x110 (RFC 9114 §8.1). */
#define STATS_QUIC_CODES 18
#define STATS_H3_CODES 18
/* TLS alerts (RFC 8446 §6), and ECN's codepoints (RFC 3168 §5). */
#define STATS_ALERTS 256
#define STATS_ECN_MARKS 4

/* What names the codes of a breakdown written by code: a code's name,
 * static or written in buf (STATS_CODE_NAME_MAX bytes). */
#define STATS_CODE_NAME_MAX 8
typedef const char *stats_code_name_fn(unsigned code, char *buf);

/* An HTTP/2 error code's name ("CANCEL"); "OTHER" past the known ones. */
stats_code_name_fn stats_h2_code_name;
/* An HTTP/3 error code's, counted at index code - 0x100
 * ("H3_REQUEST_CANCELLED"); a QUIC transport error code's
 * ("PROTOCOL_VIOLATION"); "OTHER" for the last index. */
stats_code_name_fn stats_h3_code_name, stats_quic_code_name;
/* A TLS alert's number ("120"); an ECN codepoint's name ("ect0", "ce"). */
stats_code_name_fn stats_alert_name, stats_ecn_name;
/* An HTTP status ("403"), counted at its own index; "other" for index 0,
 * where the statuses past STATS_STATUS_MAX go. */
stats_code_name_fn stats_status_name;

/* The counts broken down by a name, one line each: the field of struct
 * stats, how many names it counts by, where it sits in the --json
 * document (an object of counts by name, in its place's object) and what
 * names a code, for a breakdown by code: those are written (only the codes
 * counted) and read back by the table. The others (NULL) have a writer and
 * a reader of their own, for their names are written differently (all of
 * them, or the status code itself). volley merge adds them up name by
 * name. */
#define STATS_BREAKDOWNS(X)                                                                         \
    /* errors by why (enum cause): these count errors that ended no request too */                  \
    X(causes, CAUSE_COUNT, STATS_AT_TOTALS, "error_causes", NULL)                                   \
    /* causes[CAUSE_TLS_HANDSHAKE] by why the handshake failed (enum tls_failure) */                \
    X(tls_failures, TLS_FAIL_COUNT, STATS_AT_TLS, "handshake_failures", NULL)                       \
    /* responses by status code; other codes go to [0] */                                           \
    X(status, STATS_STATUS_MAX, STATS_AT_TOTALS, "status_codes", NULL)                              \
    /* HTTP/2: RST_STREAM received, by error code */                                                \
    X(h2_resets, STATS_H2_CODES, STATS_AT_HTTP2, "rst_stream_received", stats_h2_code_name)         \
    /* HTTP/3: streams the server reset, by error code; CONNECTION_CLOSE received, by its         \
     * transport or application error code; TLS alerts of failed handshakes; ECN marks read */ \
    X(h3_resets, STATS_H3_CODES, STATS_AT_HTTP3, "stream_reset_received", stats_h3_code_name)       \
    X(h3_close_transport, STATS_QUIC_CODES, STATS_AT_HTTP3, "connection_close_transport",           \
      stats_quic_code_name)                                                                         \
    X(h3_close_application, STATS_H3_CODES, STATS_AT_HTTP3, "connection_close_application",         \
      stats_h3_code_name)                                                                           \
    X(h3_alerts, STATS_ALERTS, STATS_AT_HTTP3, "handshake_alerts", stats_alert_name)                \
    X(h3_ecn, STATS_ECN_MARKS, STATS_AT_HTTP3, "ecn_received", stats_ecn_name)                      \
    /* connections by the protocol they spoke (protocols_all order) */                              \
    X(by_protocol, STATS_PROTOCOLS, STATS_AT_TOTALS, "protocols", NULL)                             \
    /* an HTTP proxy's CONNECT answers other than 2xx, by status ([0]: the others) */               \
    X(proxy_status, STATS_STATUS_MAX, STATS_AT_PROXY, "connect_status", stats_status_name)

struct stats {
#define STATS_COUNTER_MEMBER(field, place, key, column, metric, rule, flags) uint64_t field;
    STATS_COUNTERS(STATS_COUNTER_MEMBER)
#undef STATS_COUNTER_MEMBER
    struct errors errors;
#define STATS_BREAKDOWN_MEMBER(field, n, place, key, name) uint64_t field[n];
    STATS_BREAKDOWNS(STATS_BREAKDOWN_MEMBER)
#undef STATS_BREAKDOWN_MEMBER
#define STATS_DIST_MEMBER(field, key, column, metric, highest, flags) struct hist *field;
    STATS_DISTRIBUTIONS(STATS_DIST_MEMBER)
#undef STATS_DIST_MEMBER
};

/* Their indexes in stats_counters, stats_dists and stats_breakdowns. */
enum {
#define STATS_COUNTER_INDEX(field, place, key, column, metric, rule, flags) STATS_COUNTER_##field,
    STATS_COUNTERS(STATS_COUNTER_INDEX)
#undef STATS_COUNTER_INDEX
#define STATS_ERROR_INDEX(name, what) STATS_COUNTER_errors_##name,
        STATS_ERRORS(STATS_ERROR_INDEX)
#undef STATS_ERROR_INDEX
            STATS_NCOUNTERS
};
enum {
#define STATS_DIST_INDEX(field, key, column, metric, highest, flags) STATS_DIST_##field,
    STATS_DISTRIBUTIONS(STATS_DIST_INDEX)
#undef STATS_DIST_INDEX
        STATS_NDISTS
};
enum {
#define STATS_BREAKDOWN_INDEX(field, n, place, key, name) STATS_BREAKDOWN_##field,
    STATS_BREAKDOWNS(STATS_BREAKDOWN_INDEX)
#undef STATS_BREAKDOWN_INDEX
        STATS_NBREAKDOWNS
};

/* A counter of the table (or an error class), for the code that goes
 * through them all. */
struct stats_counter {
    const char *what;       /* in messages: "requests", "timeouts" */
    size_t offset;          /* of its uint64_t in struct stats */
    enum stats_place place; /* where it sits in the document */
    const char *key;        /* there, in its place's object */
    const char *column;     /* in a timeline record, or NULL */
    const char *metric;     /* its /metrics family after "volley_", or NULL */
    enum stats_rule rule;
    unsigned flags;
};

/* A breakdown of the table. */
struct stats_breakdown {
    size_t offset; /* of its first uint64_t in struct stats */
    size_t n;
    enum stats_place place;
    const char *key;
    stats_code_name_fn *name; /* NULL: not by code */
};

/* A distribution of the table. */
struct stats_dist {
    size_t offset; /* of its struct hist * in struct stats */
    const char *key;
    const char *column;
    const char *metric; /* its /metrics histogram after "volley_", or NULL */
    uint64_t highest;
    unsigned flags;
};

/* The counters of the table, then the error classes; the distributions;
 * the breakdowns. */
extern const struct stats_counter stats_counters[STATS_NCOUNTERS];
extern const struct stats_dist stats_dists[STATS_NDISTS];
extern const struct stats_breakdown stats_breakdowns[STATS_NBREAKDOWNS];
#define stats_ncounters ((size_t)STATS_NCOUNTERS)
#define stats_ndists ((size_t)STATS_NDISTS)
#define stats_nbreakdowns ((size_t)STATS_NBREAKDOWNS)

static inline uint64_t *stats_breakdown_at(struct stats *s, const struct stats_breakdown *b)
{
    return (uint64_t *)(void *)((char *)s + b->offset);
}

static inline const uint64_t *stats_breakdown_get(const struct stats *s,
                                                  const struct stats_breakdown *b)
{
    return (const uint64_t *)(const void *)((const char *)s + b->offset);
}

static inline uint64_t *stats_counter_at(struct stats *s, const struct stats_counter *c)
{
    return (uint64_t *)(void *)((char *)s + c->offset);
}

static inline uint64_t stats_counter_get(const struct stats *s, const struct stats_counter *c)
{
    return *(const uint64_t *)(const void *)((const char *)s + c->offset);
}

static inline struct hist *stats_dist_get(const struct stats *s, const struct stats_dist *d)
{
    return *(struct hist *const *)(const void *)((const char *)s + d->offset);
}

/* The object of the document a place's counters sit in ("errors", "tls",
 * "http2", "http3", "rate"), or NULL for the top level and STATS_AT_NONE. */
const char *stats_place_object(enum stats_place place);
/* The distributions (bit i for stats_dists[i]) a run measures: those with
 * STATS_OPEN only with -R. */
uint32_t stats_dists_measured(bool open_model);
/* The tables, one line per figure written: "counter PATH COLUMN RULE FORM"
 * (PATH in the document, COLUMN in a timeline record or "-", RULE sum or
 * min, FORM count, per_sec or mean), "breakdown PATH - sum" and
 * "distribution KEY COLUMN histogram", for the tests that check the docs
 * and volley merge against them (volley --list-fields). */
void stats_list_fields(FILE *f);

void stats_init(struct stats *s);
void stats_free(struct stats *s);
/* Adds src into dst: each counter by its rule, the histograms bucket by
 * bucket. */
void stats_merge(struct stats *dst, const struct stats *src);
/* Whether adding src into dst would take a sum past 2^64. */
bool stats_merge_overflows(const struct stats *dst, const struct stats *src);
/* Back to nothing recorded (the histograms are kept, emptied; STATS_MIN
 * counters at UINT64_MAX, none yet): what an interval starts from. */
void stats_reset(struct stats *s);
/* Socket errors plus responses with status >= 400. */
uint64_t stats_errors(const struct stats *s);
/* The JSON/diagnostic name of a cause ("refused", "reset", ...). */
const char *stats_cause_name(enum cause c);
/* The JSON name of why a TLS handshake failed ("certificate_required"). */
const char *stats_tls_failure_name(enum tls_failure f);
/* Why a handshake failed, by the alert the server sent (RFC 8446 §6). */
enum tls_failure stats_tls_alert_failure(unsigned alert);

#endif
