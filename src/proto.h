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

/* What a session says after taking input. */
enum proto_status {
    PROTO_OK,    /* go on */
    PROTO_CLOSE, /* close the connection normally (not an error): the response
                    said so, or its body ended with the stream */
    PROTO_FAIL,  /* a protocol error: close and count it under *cause */
};

struct proto_ops {
    const char *name; /* "HTTP/1.1" */
    void *(*new)(struct conn *c);
    void (*free)(void *session);
    /* The connection is (re)opened and ready: start afresh. */
    void (*open)(struct conn *c);
    /* Whether it can take a request now (nothing is in flight, for HTTP/1.1). */
    bool (*ready)(const struct conn *c);
    /* Send the first n requests of r at time now, a batch whose latency
     * counts from start_at (now, or under -R a time before). The bytes go
     * out through output() and wrote(). */
    void (*submit)(struct conn *c, const struct request *r, size_t n, uint64_t now,
                   uint64_t start_at);
    /* The next bytes to write, or 0 when there are none; *data stays valid
     * until wrote() or the next submit(). */
    size_t (*output)(struct conn *c, const char **data);
    /* n bytes of output() were written. */
    void (*wrote)(struct conn *c, size_t n);
    /* Bytes read at time now. Completed responses go to conn_response(). */
    enum proto_status (*input)(struct conn *c, const char *buf, size_t len, uint64_t now,
                               enum cause *cause);
    /* The peer closed the stream. PROTO_CLOSE when that is a normal end
     * (nothing was outstanding, or it ended a close-delimited body). */
    enum proto_status (*eof)(struct conn *c, uint64_t now, enum cause *cause);
    /* Requests in flight: sent, or being sent, and not answered. */
    size_t (*inflight)(const struct conn *c);
    /* When the oldest request in flight went out (its first byte), 0 if none. */
    uint64_t (*oldest)(const struct conn *c);
    /* The connection is going away: forget every request in flight. */
    void (*abort)(struct conn *c);
};

extern const struct proto_ops proto_h1;

#endif
