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
    ev_timer timer;          /* connect/response timeout, reconnect back-off, delay */
    struct http_parser parser;
    const struct request *batch; /* what is being written / awaited */
    size_t written;          /* bytes of batch written */
    size_t pending;          /* responses still expected for batch */
    uint64_t sent_at;        /* when the batch's first byte was written (us) */
    uint64_t backoff_us;     /* next reconnect delay after a connect failure */
    uint64_t delay_until;    /* end of the delay() pause before the next batch, or 0 */
    struct request own;      /* the batch request() returned, with a script */
    void *tls;               /* the transport's per-connection state */
};

void conn_init(struct conn *c, struct worker *w);
/* Start connecting. */
void conn_start(struct conn *c);
/* Close the socket and stop every watcher (end of run). */
void conn_stop(struct conn *c);
void conn_free(struct conn *c);

#endif
