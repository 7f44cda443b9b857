/* The protocol layer: what a connection speaks once its transport is set up.
 * The connection (conn.c) owns the socket, the transport, the timers, the
 * back-off and the schedule; a protocol session owns the framing, the
 * requests in flight (the request side and the response side of each apart)
 * and what counts as a response or an error. One session per connection slot,
 * kept across reconnects.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_PROTO_H
#define VOLLEY_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"

struct http_head_cache;
struct route;
struct request;
/* A protocol's session: its own state, opaque to the connection. */
struct proto_session;
struct sock;
struct transport;

/* A final response as the response() hook sees it, whatever the protocol,
 * and when it came. */
struct proto_response {
    int status;
    /* Its header fields as "name: value" lines (read them with
     * http_field_next), and its body: empty unless the hook takes them
     * (struct proto_wants). */
    const char *fields, *body;
    size_t fields_len, body_len;
    bool lower_case; /* the names are lower case (HTTP/2) */
    /* Where its latency counts from (under -R the intended send time),
     * when its request went out, when its first byte came (of a 1xx
     * interim response when one came first: HTTP/1.1's first status line,
     * HTTP/2's first HEADERS frame) and when it completed; times of the
     * read that brought the bytes. */
    uint64_t start_at, sent_at, first_at, done_at;
};

/* What the response() hook takes of a response, now: it may change
 * between responses (a script that defines the hook during the run). */
struct proto_wants {
    bool head, body;
};

/* Where a session's requests end: the connection's side of the protocol
 * layer (conn.c), or a test's, each call given the arg the session was made
 * with. Every request a session takes ends once, in one of these, or is
 * forgotten when the connection aborts it. */
struct proto_sink {
    /* A final response. False when the run is over for this connection
     * (a response() hook ended it): the session then takes no more input. */
    bool (*response)(void *arg, const struct proto_response *r);
    /* One request failed on its own (its stream was reset, its response
     * was malformed) while the connection goes on: one read error, counted
     * under cause. */
    void (*failed)(void *arg, enum cause cause);
    /* One request could not be sent at all (HTTP/2 would not carry its
     * header block): one write error, counted under cause. */
    void (*unsent)(void *arg, enum cause cause);
    /* The server refused one request without processing it (HTTP/2's
     * REFUSED_STREAM, or past a GOAWAY's last stream): it is sent again
     * after a back-off, or counted as a refused_stream read error when the
     * connection's requests have been refused too often since its last
     * response. */
    void (*refused)(void *arg);
    /* n requests that went out will not be answered on this connection,
     * though the server did nothing wrong (they were behind a response
     * that closed it): -n sends them again. */
    void (*returned)(void *arg, size_t n);
};

/* What a session knows of the run: set up before it, the same for every
 * connection of a worker, read-only while it is on. */
struct proto_conf {
    size_t streams;    /* -m: requests in flight at most (HTTP/2 streams) */
    size_t depth;      /* requests per batch */
    bool no_keepalive; /* a new connection for every batch */
    /* Through a proxy that is sent the requests (an http URL through an
     * HTTP proxy): those on a connection that carried a response before
     * and that it closes before answering any of them go again on a new one
     * (RFC 9112 §9.3.1), when their methods are idempotent. Proxies that
     * keep no connection alive (tinyproxy) close after each response
     * without saying so. */
    bool resend_unanswered;
    bool tls;                           /* the URL is https (HTTP/2's :scheme) */
    struct http_head_cache *head_cache; /* the worker's, for HTTP/1.1's parsers */
    struct stats *stats;                /* where the protocol's own figures go */
    const struct proto_wants *wants;    /* what response() takes, now */
};

/* What a session says after taking input. */
enum proto_status {
    PROTO_OK,    /* go on */
    PROTO_CLOSE, /* close the connection normally (not an error): the response
                    said so, or its body ended with the stream */
    PROTO_FAIL,  /* a protocol error: close and count it under *cause */
};

/* A protocol, as a table of operations on its sessions, with what the
 * rest of volley needs to know of it. */
struct proto_ops {
    const char *name; /* "HTTP/1.1", "HTTP/2", "HTTP/3" */
    const char *alpn; /* its ALPN id (RFC 7301): "http/1.1", "h2", "h3" */
    /* Where its own figures sit in the document (STATS_AT_HTTP2), or
     * STATS_AT_NONE. */
    enum stats_place figures;
    /* Whether a connection has several batches in flight (-m: streams)
     * rather than one, pipelined -m deep. */
    bool multiplexed;
    /* Whether it can carry the batch r (tls: an https URL); false with a
     * one-line reason in err. NULL: it carries whatever request_set took. */
    bool (*check)(const struct request *r, bool tls, char *err, size_t errlen);
    /* Over cleartext, where nothing negotiates, a start-up look at the
     * target along the run's route (until deadline, clock_us): false, with
     * why it does not speak this protocol in why, when it plainly does
     * not. NULL: none. */
    bool (*probe)(const struct route *route, uint64_t deadline, char *why, size_t len);
    /* The transport it needs (HTTP/3: QUIC's, over UDP), offered alone; NULL
     * when TCP, or TLS over it, carries it as the URL says. */
    const struct transport *transport;
    /* A session that ends its requests in sink, with arg; conf and sink
     * outlive it. */
    struct proto_session *(*create)(const struct proto_conf *conf, const struct proto_sink *sink,
                                    void *arg);
    void (*destroy)(struct proto_session *s);
    /* The connection is (re)opened over sock and ready: start afresh. What
     * it has to say first (HTTP/2's preface) goes out through output(). A
     * session above QUIC finds the QUIC connection in sock's state. */
    void (*open)(struct proto_session *s, struct sock *sock);
    /* Whether it can take another batch now: nothing is in flight (HTTP/1.1),
     * or a batch fits in the streams it may open (HTTP/2). */
    bool (*ready)(const struct proto_session *s);
    /* Send the first n requests of r at time now, a batch whose latency
     * counts from start_at (under -R, a time before now), or from when each
     * request goes out when start_at is 0. The bytes go out through output()
     * and wrote(). r stays unchanged while its requests are in flight unless
     * own says it is the connection's own buffer, which the next batch
     * refills. */
    void (*submit)(struct proto_session *s, const struct request *r, bool own, size_t n,
                   uint64_t now, uint64_t start_at);
    /* The next bytes to write, or 0 when there are none; *data stays valid
     * until wrote() or the next submit(). */
    size_t (*output)(struct proto_session *s, const char **data);
    /* n bytes of output() were written. */
    void (*wrote)(struct proto_session *s, size_t n);
    /* Bytes read at time now. Completed responses go to the sink. What the
     * session has to send in return (HTTP/2's acknowledgements and window
     * updates) the connection writes after it. */
    enum proto_status (*input)(struct proto_session *s, const char *buf, size_t len, uint64_t now,
                               enum cause *cause);
    /* The peer closed the stream. PROTO_CLOSE when that is a normal end
     * (nothing was outstanding, or it ended a close-delimited body). */
    enum proto_status (*eof)(struct proto_session *s, uint64_t now, enum cause *cause);
    /* A timer of the transport's own fired (QUIC's loss recovery or idle
     * timeout): whether the connection goes on. What the session has to
     * send then (recovery's packets) the connection writes after it. NULL
     * over transports without timers. */
    enum proto_status (*wake)(struct proto_session *s, uint64_t now, enum cause *cause);
    /* Requests in flight: sent, or being sent, and not answered. */
    size_t (*inflight)(const struct proto_session *s);
    /* Since when the oldest thing the connection waits for has been waited
     * for (a request in flight; for HTTP/2 also the acknowledgement of its
     * SETTINGS), 0 if none: --timeout counts from there. */
    uint64_t (*oldest)(const struct proto_session *s);
    /* That wait ran past --timeout: what to count it as. */
    enum cause (*expired)(const struct proto_session *s);
    /* The connection is going away: forget every request in flight. */
    void (*abort)(struct proto_session *s);
};

#endif
