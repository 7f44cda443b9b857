/* What one worker measured (and, after the run, all of them merged): counts,
 * error classes and causes, status codes and the latency and Req/Sec histograms.
 * Workers own theirs exclusively while the run is on.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_STATS_H
#define VOLLEY_STATS_H

#include <stdint.h>

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
    CAUSE_UNREACHABLE, /* connect: network/host unreachable, address unavailable */
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

struct errors {
    uint64_t connect, read, write, timeout, status;
};

static inline void errors_add(struct errors *dst, const struct errors *src)
{
    dst->connect += src->connect;
    dst->read += src->read;
    dst->write += src->write;
    dst->timeout += src->timeout;
    dst->status += src->status;
}

/* HTTP/2 error codes (RFC 9113 §7) are 0..0xd; others are counted as 0xe. */
#define STATS_H2_CODES 15

/* What an HTTP/2 run saw of the protocol itself. */
struct h2_stats {
    uint64_t goaways;                /* GOAWAY frames received */
    uint64_t refused;                /* requests refused unprocessed, sent again */
    uint64_t resets[STATS_H2_CODES]; /* RST_STREAM received, by error code */
    uint64_t settings;               /* SETTINGS frames received (not ACKs) */
    uint64_t streams;                /* with settings: the fewest streams a
                                         connection could open at once (-m
                                         capped by the server's SETTINGS) */
};

struct stats {
    uint64_t requests;     /* complete responses */
    uint64_t sent;         /* requests whose batch went out */
    uint64_t bytes;        /* bytes read, headers included */
    uint64_t connects;     /* successful connections */
    uint64_t reopened;     /* of which were not their slot's first */
    uint64_t reconnects;   /* normal closes (not errors) that ended a connection */
    uint64_t handshakes;   /* completed TLS handshakes */
    uint64_t resumed;      /* of which resumed a session */
    uint64_t handshake_us; /* time spent in them, from TCP connect to done */
    uint64_t pauses;       /* delay() pauses asked for */
    uint64_t paused_us;    /* their total length */
    struct errors errors;
    uint64_t causes[CAUSE_COUNT];
    uint64_t tls_failures[TLS_FAIL_COUNT]; /* of causes[CAUSE_TLS_HANDSHAKE] */
    uint64_t status[STATS_STATUS_MAX];     /* per status code; other codes go to [0] */
    struct h2_stats h2;
    struct hist *latency;   /* with -R, from each request's intended send time */
    struct hist *u_latency; /* -R: from the actual send (uncorrected) */
    struct hist *lag;       /* -R: actual minus intended send time of each batch */
    struct hist *connect;   /* connect and TLS handshake time of each connection */
    struct hist *rps;
};

void stats_init(struct stats *s);
void stats_free(struct stats *s);
/* Adds src into dst. */
void stats_merge(struct stats *dst, const struct stats *src);
/* Back to nothing recorded (the histograms are kept, emptied): what an
 * interval starts from. */
void stats_reset(struct stats *s);
/* Socket errors plus responses with status >= 400. */
uint64_t stats_errors(const struct stats *s);
/* The JSON/diagnostic name of a cause ("refused", "reset", ...). */
const char *stats_cause_name(enum cause c);
/* The JSON name of why a TLS handshake failed ("certificate_required"). */
const char *stats_tls_failure_name(enum tls_failure f);
/* An HTTP/2 error code's name ("CANCEL"), "OTHER" past the known ones. */
const char *stats_h2_code_name(unsigned code);

#endif
