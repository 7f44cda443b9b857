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
    CAUSE_GOAWAY,           /* read: GOAWAY with an error code */
    CAUSE_STREAM_RESET,     /* read: RST_STREAM, any code but REFUSED_STREAM */
    CAUSE_H2_PROTOCOL,      /* read: the server broke the protocol, or garbage */
    CAUSE_H2_FLOOD,         /* read: more frames than a peer should send */
    CAUSE_FLOW_CONTROL,     /* read: a flow-control error; timeout: a stalled body */
    CAUSE_SETTINGS_TIMEOUT, /* timeout: SETTINGS never acknowledged */
    CAUSE_STREAM_LIMIT,     /* timeout: no stream allowed to open */
    /* HTTP/3 and QUIC */
    CAUSE_QUIC_CLOSE,           /* read: CONNECTION_CLOSE with an error code */
    CAUSE_QUIC_IDLE_TIMEOUT,    /* read: no packet from the server for the idle timeout */
    CAUSE_QUIC_STATELESS_RESET, /* read: the server no longer knew the connection */
    CAUSE_QUIC_VERSION,         /* connect: version negotiation to no version volley has */
    CAUSE_QUIC_PROTOCOL,        /* read: the server broke QUIC */
    CAUSE_H3_PROTOCOL,          /* read: the server broke HTTP/3 */
    CAUSE_COUNT
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

/* QUIC transport error codes 0x0..0x10 (RFC 9000 §20.1) are counted one by
 * one, others as the last; so are HTTP/3's 0x100..0x110 (RFC 9114 §8.1). */
#define STATS_QUIC_CODES 18
#define STATS_H3_CODES 18

/* What an HTTP/3 run saw of the protocol and of QUIC. */
struct h3_stats {
    uint64_t settings;     /* connections that learnt the server's stream limit */
    uint64_t streams;      /* with settings: the fewest streams a connection
                                could open at once (-m capped by the server) */
    uint64_t refused;      /* requests the server did not process, sent again */
    uint64_t goaways;      /* GOAWAY frames received */
    uint64_t packets_sent; /* UDP datagrams */
    uint64_t packets_received;
    uint64_t lost;           /* packets of request streams declared lost (and
                                so sent again), counted once per stream */
    uint64_t ended;          /* connections whose end figures follow */
    uint64_t rtt_us;         /* sum of their smoothed RTT at their end */
    uint64_t min_rtt_us;     /* the least RTT any connection saw, 0 if none */
    uint64_t cwnd;           /* sum of their congestion windows at their end */
    uint64_t early_attempts; /* handshakes that sent 0-RTT requests */
    uint64_t early_accepted, early_rejected;
    uint64_t early_requests; /* requests sent as 0-RTT data */
    uint64_t stateless_resets, version_negotiations, idle_timeouts;
    uint64_t ecn_received[4]; /* --ecn: datagrams by their marks (RFC 3168 codepoint) */
    uint64_t alerts[256];     /* TLS alerts that ended a handshake, sent or received */
    uint64_t close_transport[STATS_QUIC_CODES]; /* CONNECTION_CLOSE received, by code */
    uint64_t close_application[STATS_H3_CODES];
    uint64_t resets[STATS_H3_CODES]; /* request streams the server reset, by code */
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
    uint64_t status[STATS_STATUS_MAX]; /* per status code; other codes go to [0] */
    struct h2_stats h2;
    struct h3_stats h3;
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
/* An HTTP/2 error code's name ("CANCEL"), "OTHER" past the known ones. */
const char *stats_h2_code_name(unsigned code);
/* The name of the HTTP/3 error code counted at index i of STATS_H3_CODES
 * ("H3_REQUEST_CANCELLED"), and of the QUIC transport error code counted
 * at index i of STATS_QUIC_CODES ("PROTOCOL_VIOLATION"); "OTHER" for the
 * last. */
const char *stats_h3_code_name(unsigned i);
const char *stats_quic_code_name(unsigned i);

#endif
