/* One connection slot to the target: connects, hands the requests of its
 * load model to its protocol session, writes and reads for it, and reopens
 * after closes and errors. Owned by a worker and run by its event loop; it
 * sees the worker only through struct conn_config, read-only, and the few
 * flags of struct conn_live.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CONN_H
#define VOLLEY_CONN_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile.h"
#include "proto.h"
#include "protocols.h"
#include "request.h"
#include "schedule.h"
#include "stats.h"
#include "transport.h"
#include "tunnel.h"
#include "uring.h"

struct budget;
struct conn;
struct http_head_cache;
struct route;
struct sources_count;
struct sources_ports;

/* -R: the open model's schedule. Connection g (numbered over every worker)
 * of total sends its batch k when request (g + k * total) * depth of the
 * whole run is due under the rate profile: with a constant rate, at
 * start + (g + k * total) * depth / rate. */
struct pace {
    struct schedule schedule; /* this worker's connections waiting for their time */
    uint64_t start;           /* clock_us of the run's start; 0 until it starts */
    struct profile profile;   /* the whole run's target rate over time */
    double end_us;            /* from start: the run's end (-d), or INFINITY */
    size_t depth;             /* requests per batch */
    uint64_t first, stride;   /* connection i's place in the run's turns: first + i stride */
    uint64_t total;           /* connections of the whole run */
};

/* What the connections send and what becomes of their responses: the
 * static request, or the script's hooks. The functions stay for the run;
 * whether delay() is asked, and what response() takes, change (struct
 * conn_live). */
struct conn_hooks {
    /* The requests to send: the static batch for the protocol the
     * connection speaks (its index in conn_config's protocols), or
     * request()'s, given the connection's own buffer to fill. NULL when
     * this connection is to send nothing more. */
    const struct request *(*request)(void *arg, struct request *own, size_t protocol);
    /* delay(): milliseconds to pause before the next batch, when asked. */
    double (*delay)(void *arg);
    /* response(): given each response; NULL if the script has none. */
    void (*response)(void *arg, const struct proto_response *r);
    /* Called once when every connection has first been opened or has failed
     * to open (with -R the run starts after that); NULL if nobody waits. */
    void (*settled)(void *arg);
    void *arg;
};

/* What every connection of a worker shares: set up by the worker before
 * the run, read-only while it is on. The worker owns everything it points
 * to. */
struct conn_config {
    struct ev_loop *loop;
    const struct transport *transport;
    /* The protocols a connection may speak: over TLS, the one its server
     * chose in ALPN (HTTP/1.1 when it chose none), else the one there is;
     * and what the sessions of each see of the run. */
    const struct proto_ops *protocols[PROTOCOLS_COUNT];
    struct proto_conf sessions[PROTOCOLS_COUNT];
    size_t nprotocols;
    /* Where and how connections connect (a proxy, source addresses);
     * connection i of the worker is the run's first + i. With --bind, what
     * each source address saw, and where the worker looks for ports. */
    const struct route *route;
    uint64_t first;
    struct sources_count *by_source;
    struct sources_ports *ports;
    /* The set-up between the TCP connect and the transport's handshake,
     * begun and resumed when the socket is ready: a proxy's tunnel
     * (conn_tunnel_step), or NULL. */
    void (*tunnel)(struct conn *c);
    uint64_t timeout_us;
    struct stats *stats;   /* what the connections record into */
    struct budget *budget; /* -n, or NULL */
    struct pace *pace;     /* -R, or NULL */
    char *rbuf;            /* one receive buffer for every connection */
    size_t rbuf_len;
    struct conn_hooks hooks;
};

/* Responses counted but not yet in the histograms, all with the same
 * times: those of one read that took the same times (a pipelined batch
 * answered at once) are recorded together, with their count. */
struct conn_tally {
    uint64_t start_at, sent_at, first_at, done_at; /* as struct proto_response's */
    uint64_t n;                                    /* 0: none */
};

/* What changes while the run is on (on the worker's thread only). */
struct conn_live {
    bool stopping; /* the run is over for this worker: do nothing more */
    /* --start-at in the closed model: the connections open before the run
     * and send nothing until it starts (then conn_kick()), as under -R. */
    bool held;
    size_t unsettled;         /* connections not yet opened nor failed to open */
    bool delay;               /* the script defines delay(): ask it before each batch */
    struct proto_wants wants; /* what response() takes of a response */
    size_t open;              /* connections open now (for the live metrics) */
    struct conn_tally tally;  /* emptied after each read: see conn_record */
};

enum conn_state {
    CONN_CLOSED,     /* no socket */
    CONN_CONNECTING, /* TCP connect in progress */
    CONN_TUNNEL,     /* through a proxy: its tunnel's set-up in progress */
    CONN_HANDSHAKE,  /* transport set-up (TLS) in progress */
    CONN_OPEN,       /* connected: the session runs */
};

struct conn {
    const struct conn_config *cfg;
    struct conn_live *live;
    size_t index; /* in the worker */
    struct sock sock;
    enum conn_state state;
    ev_io rio, wio;         /* over epoll (and a proxy's tunnel on io_uring) */
    struct uring_link link; /* over io_uring (link.ring set) */
    ev_timer timer;         /* connect/response timeout, back-off, delay() pause */
    /* The protocol it speaks (set when it opens) and its session; one
     * session per protocol spoken, kept across reconnects. */
    const struct proto_ops *proto;
    struct proto_session *session;
    struct proto_session *sessions[PROTOCOLS_COUNT];
    struct request own;         /* the batch request() returned */
    uint64_t connect_at;        /* when the current connection attempt began */
    uint64_t connected_at;      /* when its TCP connect completed, then its tunnel */
    struct tunnel_conn tunnel;  /* how far that tunnel's set-up got */
    uint64_t available_at;      /* when it last became free to send after being set
                                up or after a delay() pause: under -R latency
                                counts from the later of this and the intended
                                time, as neither wait was the server's doing */
    uint64_t backoff_us;        /* the pause before the next attempt after a failure */
    uint64_t retry_at;          /* no attempt before this, after a failure */
    uint64_t refusals;          /* requests refused unprocessed since the last response */
    uint64_t delay_until;       /* end of the delay() pause before the next batch, or 0 */
    bool delay_served;          /* that pause is over; the batch has not gone yet */
    struct schedule_entry turn; /* -R: the intended send time of the next batch, and
                                   its place in the schedule */
    uint64_t batches;           /* -R: batches sent so far, the schedule's k */
    bool want;                  /* a batch is waiting for the connection to open */
    size_t claimed;             /* -n: requests claimed for it meanwhile */
    bool opened;                /* it has been open before */
    bool carried;               /* request bytes went out since it opened */
    bool settled;               /* counted in live->unsettled already */
    bool done;                  /* request() gave nothing: it sends no more */
    bool read_wants_write;      /* TLS: a read waits for the socket to be writable */
    bool write_wants_read;      /* TLS: a write waits for it to be readable */
    uint8_t protocol;           /* proto's index in conn_config's protocols */
};

void conn_init(struct conn *c, const struct conn_config *cfg, struct conn_live *live, size_t index);
/* Open the connection; with want, a batch goes out as soon as it is open. */
void conn_start(struct conn *c, bool want);
/* Send what may go now: the run has started (-R), or the connection's
 * intended time has come. */
void conn_kick(struct conn *c);
/* The schedule's call when the intended time of a connection (its turn)
 * has come. */
void conn_turn(struct schedule_entry *turn);
/* Records the responses tallied into cfg's statistics. Each read does it
 * before it returns; whoever takes the statistics away (the end of an
 * interval, of the warm-up) does it first too. */
void conn_record(const struct conn_config *cfg, struct conn_live *live);
/* Close and stop every watcher (end of run). Requests in flight are handed
 * back to -n's budget, to be sent by the connections that go on. */
void conn_stop(struct conn *c);
void conn_free(struct conn *c);

/* The steps a completion on the io_uring engine drives (conn_ring.c), as
 * the watchers' readiness drives them on epoll.
 * The connect completed: err 0, or why it failed (an errno value). */
void conn_connect_done(struct conn *c, int err);
/* Setting the connection up failed (connect, a proxy's tunnel, the
 * handshake), for this cause. */
void conn_connect_failed(struct conn *c, enum cause cause);
/* A set-up step (the handshake, a proxy's tunnel) goes on once the socket
 * is readable (want IO_WANT_READ: the write watcher stopped) or writable. */
void conn_await(struct conn *c, int want);
/* The transport's handshake, begun or continued (through a proxy, once its
 * tunnel is up: conn_tunnel.c). */
void conn_handshake(struct conn *c);
/* Bytes read at now, to the session. Returns whether the connection goes
 * on (it may have ended, normally or not, or the run). */
bool conn_take(struct conn *c, const char *buf, size_t n, uint64_t now);
/* After input: the next batch, or what the session has to say in return.
 * Returns whether the session could take a batch. */
bool conn_reply(struct conn *c);
/* The peer ended the stream. */
void conn_eof(struct conn *c);
/* Reading or writing failed (an errno value). */
void conn_read_failed(struct conn *c, int err);
void conn_write_failed(struct conn *c, int err);
/* n bytes of the session's output went out. */
void conn_sent(struct conn *c, size_t n);
/* The socket can take more: the rest of the output, then the next batch
 * if the session is free for it. */
void conn_writable(struct conn *c);

#endif
