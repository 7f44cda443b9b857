/* QUIC (RFC 9000) for HTTP/3: the transport of a connection whose socket is
 * UDP. It owns the datagrams in and out (GSO and GRO, or sendmmsg and
 * recvmmsg where the kernel has no segmentation), the handshake (TLS 1.3
 * through GnuTLS and ngtcp2's crypto helper, resumption, 0-RTT), the timers
 * of loss recovery and the idle timeout on the worker's loop, and what the
 * connection's end says (a TLS alert, CONNECTION_CLOSE, a stateless reset).
 * Above it the HTTP/3 session (h3.c) exchanges stream data with it.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_QUIC_H
#define VOLLEY_QUIC_H

#include <ngtcp2/ngtcp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quic_tls.h"
#include "stats.h"
#include "transport.h"

struct quic;

extern const struct transport transport_quic;

/* What the run asks of QUIC (from the command line), set once before any
 * worker starts. */
struct quic_options {
    struct quic_tls_options tls;
    bool ecn; /* --ecn */
};

/* Builds the run's GnuTLS credentials. Exits with a one-line message when a
 * certificate or key file cannot be used. */
void quic_setup(const struct quic_options *o);
void quic_cleanup(void);

/* What the session above a QUIC connection gives it: the stream events
 * (every function returns 0, or -1 to end the connection with the cause the
 * session keeps), and the stream data to send. */
struct quic_app {
    void *arg;
    /* Stream data in order, fin at the stream's end. */
    int (*recv)(void *arg, int64_t id, const uint8_t *data, size_t len, bool fin);
    /* The peer acknowledged len more bytes of what id sent. */
    int (*acked)(void *arg, int64_t id, uint64_t len);
    /* The stream is gone (both sides done, or reset); code is its
     * application error code, or the session's no-error code. */
    int (*closed)(void *arg, int64_t id, uint64_t code);
    /* The peer reset its sending side (RESET_STREAM) or asked ours to stop
     * (STOP_SENDING), with this application error code. */
    int (*reset)(void *arg, int64_t id, uint64_t code);
    /* More bidirectional streams may be opened now. */
    int (*streams)(void *arg);
    /* The peer's window on stream id opened. */
    int (*unblocked)(void *arg, int64_t id);
    /* The next stream data to send: fills up to n vectors of stream *id
     * (-1 when there is none), with *fin set at its end; returns how many,
     * or < 0 to end the connection. */
    long (*pull)(void *arg, int64_t *id, int *fin, ngtcp2_vec *v, size_t n);
    /* n bytes of what pull() gave for id went into a packet. */
    int (*pushed)(void *arg, int64_t id, size_t n);
    /* Stream id may send no more now: its window is full (blocked), or its
     * sending side was shut. */
    void (*blocked)(void *arg, int64_t id);
    void (*shut)(void *arg, int64_t id);
    /* 0-RTT was rejected: every stream opened before the handshake is gone. */
    int (*early_rejected)(void *arg);
    uint64_t no_error; /* the code of a clean close (H3_NO_ERROR) */
};

/* The QUIC connection of a socket the transport set up. */
struct quic *quic_of(struct sock *s);
/* The session starts on the connection. */
void quic_attach(struct quic *q, const struct quic_app *app);

int quic_open_bidi(struct quic *q, int64_t *id, void *stream_data);
int quic_open_uni(struct quic *q, int64_t *id);
/* Bidirectional streams that may still be opened. */
uint64_t quic_streams_left(struct quic *q);
/* n bytes of stream id were consumed: the windows open by as much. */
void quic_consumed(struct quic *q, int64_t id, size_t n);
/* Stop reading / writing stream id with an application error code. */
void quic_shutdown_read(struct quic *q, int64_t id, uint64_t code);
void quic_shutdown_write(struct quic *q, int64_t id, uint64_t code);
/* The session found the connection broken: it closes with this
 * application error code (CONNECTION_CLOSE when the socket closes). */
void quic_fail(struct quic *q, uint64_t code);
/* Whether requests went out as 0-RTT data on this connection. */
bool quic_early(struct quic *q);

/* The datagrams the transport's read() put in buf (len bytes), in: their
 * packets decrypted and handled (stream data goes to the session). false
 * when the connection is over; quic_cause() says why. */
bool quic_input(struct quic *q, const char *buf, size_t len);
/* The packets to send next, as one batch of datagrams the transport's
 * write() sends (with GSO, one system call), with new stream data pulled
 * from the session; 0 when there is nothing to send. *data stays valid
 * until quic_wrote() has taken all of it. */
size_t quic_output(struct quic *q, const char **data);
void quic_wrote(struct quic *q, size_t n);
/* Why the connection is over: a cause, and the figures kept in the
 * worker's stats (the alert, the codes of CONNECTION_CLOSE). */
enum cause quic_cause(struct quic *q);
/* Whether the connection is over (it can send no more). */
bool quic_over(struct quic *q);
/* Whether the server's window on the connection is full: no stream may
 * send until it opens. */
bool quic_window_full(struct quic *q);

/* For a handshake without a loop (the start-up check, quic_start.c): when
 * QUIC's timer is next due (clock_us), UINT64_MAX for never; what is due
 * then, false when it ended the connection (also the timer's work during
 * the run); why the handshake failed, in words; and, once it completed,
 * the round trip it measured, which the run's handshakes start from. */
uint64_t quic_expiry_us(struct quic *q);
bool quic_expire(struct quic *q);
void quic_describe(struct quic *q, char *why, size_t len);
void quic_measured(struct quic *q);

#endif
