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

struct conn;
struct request;

/* A final response as the response() hook sees it, whatever the protocol. */
struct proto_response {
    int status;
    /* Its header fields as "name: value" lines (read them with
     * http_field_next), and its body: set only when the hook asks for them
     * (conn_env's want_head and want_body). */
    const char *fields, *body;
    size_t fields_len, body_len;
    bool lower_case; /* the names are lower case (HTTP/2) */
};

/* What a session says after taking input. */
enum proto_status {
    PROTO_OK,    /* go on */
    PROTO_CLOSE, /* close the connection normally (not an error): the response
                    said so, or its body ended with the stream */
    PROTO_FAIL,  /* a protocol error: close and count it under *cause */
};

struct proto_ops {
    const char *name; /* "HTTP/1.1", "HTTP/2", "HTTP/3" */
    void *(*new)(struct conn *c);
    void (*free)(void *session);
    /* The connection is (re)opened and ready: start afresh. What it has to
     * say first (HTTP/2's preface) goes out through output(). */
    void (*open)(struct conn *c);
    /* Whether it can take another batch now: nothing is in flight (HTTP/1.1),
     * or a batch fits in the streams it may open (HTTP/2). */
    bool (*ready)(const struct conn *c);
    /* Send the first n requests of r at time now, a batch whose latency
     * counts from start_at (under -R, a time before now), or from when each
     * request goes out when start_at is 0. The bytes go out through output()
     * and wrote(). r stays unchanged while its requests are in flight unless
     * it is the connection's own (c->own), which the next batch refills. */
    void (*submit)(struct conn *c, const struct request *r, size_t n, uint64_t now,
                   uint64_t start_at);
    /* The next bytes to write, or 0 when there are none; *data stays valid
     * until wrote() or the next submit(). */
    size_t (*output)(struct conn *c, const char **data);
    /* n bytes of output() were written. */
    void (*wrote)(struct conn *c, size_t n);
    /* Bytes read at time now. Completed responses go to conn_response().
     * What the session has to send in return (HTTP/2's acknowledgements and
     * window updates) the connection writes after it. */
    enum proto_status (*input)(struct conn *c, const char *buf, size_t len, uint64_t now,
                               enum cause *cause);
    /* The peer closed the stream. PROTO_CLOSE when that is a normal end
     * (nothing was outstanding, or it ended a close-delimited body). */
    enum proto_status (*eof)(struct conn *c, uint64_t now, enum cause *cause);
    /* A timer of the transport's own fired (QUIC's loss recovery or idle
     * timeout): whether the connection goes on. What the session has to
     * send then (recovery's packets) the connection writes after it. NULL
     * over transports without timers. */
    enum proto_status (*wake)(struct conn *c, uint64_t now, enum cause *cause);
    /* Requests in flight: sent, or being sent, and not answered. */
    size_t (*inflight)(const struct conn *c);
    /* Since when the oldest thing the connection waits for has been waited
     * for (a request in flight; for HTTP/2 also the acknowledgement of its
     * SETTINGS), 0 if none: --timeout counts from there. */
    uint64_t (*oldest)(const struct conn *c);
    /* That wait ran past --timeout: what to count it as. */
    enum cause (*expired)(const struct conn *c);
    /* The connection is going away: forget every request in flight. */
    void (*abort)(struct conn *c);
};

extern const struct proto_ops proto_h1;
extern const struct proto_ops proto_h2;
#ifdef VOLLEY_HTTP3
extern const struct proto_ops proto_h3;
#endif

#endif
