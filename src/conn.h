/* One connection to the target: a state machine that connects, writes a
 * batch of requests, reads their responses and starts over, reconnecting
 * after closes and errors. Owned by a worker and run by its event loop.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CONN_H
#define VOLLEY_CONN_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "request.h"

struct worker;

enum conn_state {
    CONN_CLOSED,     /* no socket: waiting to (re)connect */
    CONN_CONNECTING, /* TCP connect in progress */
    CONN_HANDSHAKE,  /* transport set-up (TLS) in progress */
    CONN_IDLE,       /* connected, no request outstanding */
    CONN_ACTIVE,     /* a batch is being written or awaited */
};

struct conn {
    struct worker *worker;
    int fd;
    enum conn_state state;
    ev_io rio, wio;
    ev_timer timer; /* connect/response timeout, reconnect back-off, delay */
    struct http_parser parser;
    const struct request *batch; /* what is being written / awaited */
    size_t batch_len;            /* bytes of batch to write (all, or the first requests under -n) */
    size_t batch_depth;          /* requests in those bytes */
    size_t written;              /* bytes of batch written */
    size_t pending;              /* responses still expected for batch */
    uint64_t sent_at;            /* when the batch's first byte was written (us) */
    uint64_t start_at;           /* where its latency counts from: sent_at, or with -R due */
    uint64_t due;                /* -R: the intended send time of the next batch */
    uint64_t batches;            /* -R: batches sent so far, the schedule's k */
    size_t slot;                 /* -R: place in the worker's schedule + 1, 0 when not queued */
    uint64_t backoff_us;         /* next reconnect delay after a connect failure */
    uint64_t delay_until;        /* end of the delay() pause before the next batch, or 0 */
    struct request own;          /* the batch request() returned, with a script */
    void *tls;                   /* the transport's per-connection state */
};

void conn_init(struct conn *c, struct worker *w);
/* Start connecting. */
void conn_start(struct conn *c);
/* Close the socket and stop every watcher (end of run). */
void conn_stop(struct conn *c);
void conn_free(struct conn *c);
/* -R: the connection's intended send time has come (from the schedule). */
void conn_due(struct conn *c);

#endif
