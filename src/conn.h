/* One connection slot to the target: connects, hands the requests of its
 * load model to its protocol session, writes and reads for it, and reopens
 * after closes and errors. Owned by a worker and run by its event loop; it
 * sees the worker only through the narrow struct conn_env.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CONN_H
#define VOLLEY_CONN_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile.h"
#include "proto.h"
#include "request.h"
#include "schedule.h"
#include "stats.h"
#include "transport.h"

struct budget;
struct http_head_cache;
struct net_addr;

/* -R: the open model's schedule. Connection g (numbered over every worker)
 * of total sends its batch k when request (g + k * total) * depth of the
 * whole run is due under the rate profile: with a constant rate, at
 * start + (g + k * total) * depth / rate. */
struct pace {
    struct schedule schedule; /* this worker's connections waiting for their time */
    uint64_t start;           /* clock_us of the run's start; 0 until it starts */
    struct profile profile;   /* the whole run's target rate over time */
    size_t depth;             /* requests per batch */
    uint64_t first;           /* g of this worker's first connection */
    uint64_t total;           /* connections of the whole run */
};

/* What a connection may see of its worker. The worker fills it and owns
 * everything it points to. */
struct conn_env {
    struct ev_loop *loop;
    const struct transport *transport;
    const struct proto_ops *proto;
    const struct net_addr *addr;
    bool tls;       /* the URL is https (HTTP/2's :scheme) */
    size_t streams; /* -m: requests in flight at most (HTTP/2 streams) */
    uint64_t timeout_us;
    bool no_keepalive;
    struct stats *stats;
    struct budget *budget; /* -n, or NULL */
    struct pace *pace;     /* -R, or NULL */
    char *rbuf;            /* one receive buffer for every connection */
    size_t rbuf_len;
    struct http_head_cache *head_cache;
    /* The requests to send: the static batch, or request()'s through the
     * hook below, given the connection's own buffer to fill. NULL when this
     * connection is to send nothing more. */
    const struct request *(*request)(void *arg, struct request *own);
    /* delay(): milliseconds to pause before the next batch; NULL if none. */
    double (*delay)(void *arg);
    /* response(): given each response; NULL if none. want_head and want_body
     * say what of the response it takes. */
    void (*response)(void *arg, const struct proto_response *r);
    bool want_head, want_body;
    void *arg;
    size_t open;   /* connections open now (for the live metrics) */
    size_t depth;  /* requests per batch */
    bool stopping; /* the run is over for this worker: do nothing more */
    /* Called once when every connection has first been opened or has failed
     * to open (with -R the run starts after that). */
    void (*settled)(void *arg);
    size_t unsettled;
};

enum conn_state {
    CONN_CLOSED,     /* no socket */
    CONN_CONNECTING, /* TCP connect in progress */
    CONN_HANDSHAKE,  /* transport set-up (TLS) in progress */
    CONN_OPEN,       /* connected: the session runs */
};

struct conn {
    struct conn_env *env;
    size_t index; /* in the worker */
    struct sock sock;
    enum conn_state state;
    ev_io rio, wio;
    ev_timer timer;        /* connect/response timeout, back-off, delay() pause */
    void *session;         /* the protocol's, kept across reconnects */
    struct request own;    /* the batch request() returned */
    uint64_t connect_at;   /* when the current connection attempt began */
    uint64_t connected_at; /* when its TCP connect completed */
    uint64_t available_at; /* when it last became free to send after being set
                                up or after a delay() pause: under -R latency
                                counts from the later of this and the intended
                                time, as neither wait was the server's doing */
    uint64_t backoff_us;   /* the pause before the next attempt after a failure */
    uint64_t retry_at;     /* no attempt before this, after a failure */
    uint64_t delay_until;  /* end of the delay() pause before the next batch, or 0 */
    bool delay_served;     /* that pause is over; the batch has not gone yet */
    uint64_t due;          /* -R: the intended send time of the next batch */
    uint64_t batches;      /* -R: batches sent so far, the schedule's k */
    size_t slot;           /* -R: place in the schedule + 1, 0 when not queued */
    bool want;             /* a batch is waiting for the connection to open */
    size_t claimed;        /* -n: requests claimed for it meanwhile */
    bool opened;           /* it has been open before */
    bool carried;          /* request bytes went out since it opened */
    bool settled;          /* counted in env->unsettled already */
    bool done;             /* request() gave nothing: it sends no more */
    bool read_wants_write; /* TLS: a read waits for the socket to be writable */
    bool write_wants_read; /* TLS: a write waits for it to be readable */
};

void conn_init(struct conn *c, struct conn_env *env, size_t index);
/* Open the connection; with want, a batch goes out as soon as it is open. */
void conn_start(struct conn *c, bool want);
/* Send what may go now: the run has started (-R), or the connection's
 * intended time has come (from the schedule). */
void conn_kick(struct conn *c);
/* Close and stop every watcher (end of run). Requests in flight are handed
 * back to -n's budget, to be sent by the connections that go on. */
void conn_stop(struct conn *c);
void conn_free(struct conn *c);

/* For sessions: a final response of a request whose latency counts from
 * start_at, sent at sent_at, completed at now. Returns false when the
 * worker is stopping (a response() hook ended the run). */
bool conn_response(struct conn *c, const struct proto_response *r, uint64_t start_at,
                   uint64_t sent_at, uint64_t now);
/* For sessions: one request failed on its own (its stream was reset) while
 * the connection goes on: one read error, counted under cause. */
void conn_request_failed(struct conn *c, enum cause cause);
/* For sessions: n requests that went out but will not be answered on this
 * connection, though the server did nothing wrong (they were behind a
 * response that closed it): -n sends them again. */
void conn_requests_returned(struct conn *c, size_t n);

#endif
