/* The seam between a connection and the bytes on its socket: plain TCP or
 * Unix sockets, TLS, or QUIC's datagrams. A connection calls these and never
 * the syscalls.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_TRANSPORT_H
#define VOLLEY_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "stats.h"

struct ev_loop;

/* Results below zero from the calls below. */
enum io_result {
    IO_OK = 0,
    IO_ERROR = -1,      /* failed; errno says why */
    IO_WANT_READ = -2,  /* try again when the socket is readable */
    IO_WANT_WRITE = -3, /* try again when the socket is writable */
};

/* What a transport works on: the socket of the current connection, and the
 * transport's own state for the connection slot, kept across reconnects
 * (the TLS session it resumes). */
struct sock {
    int fd;
    void *state;
    /* Set by the connection for a transport with timers and figures of its
     * own (QUIC's loss recovery and idle timeout): the worker's loop and
     * stats, and what to call when such a timer fired and the connection
     * should look again (at what there is to send, or at its end). */
    struct ev_loop *loop;
    struct stats *stats;
    void (*wake)(struct sock *s);
};

struct transport {
    bool secure;   /* TLS: handshake() is a TLS handshake */
    bool datagram; /* the socket is UDP (QUIC): read() and write() move
                      datagrams, which only the session above can read */
    /* The io_uring engine can carry it: no handshake, and read() and write()
     * move the socket's bytes as they are (uring.h). Otherwise its
     * connections run on epoll whatever the engine. */
    bool ring;
    /* After the TCP connect: finish setting up (the TLS handshake). IO_OK when
     * ready to send, IO_WANT_* to wait, IO_ERROR when it failed. */
    int (*handshake)(struct sock *s);
    /* Whether the handshake just completed resumed an earlier session. */
    bool (*resumed)(struct sock *s);
    /* The application protocol it negotiated (ALPN, RFC 7301): its id, *len
     * bytes, or NULL when none was (plain sockets, or a TLS server that
     * chose none). */
    const char *(*alpn)(struct sock *s, size_t *len);
    /* After handshake() failed: why (an enum tls_failure), or NULL for a
     * transport whose handshake cannot fail. */
    int (*failure)(struct sock *s);
    /* > 0 bytes read, 0 at end of stream, or an io_result. IO_WANT_WRITE: the
     * read can go on only once the socket is writable (TLS). */
    ssize_t (*read)(struct sock *s, char *buf, size_t len);
    /* > 0 bytes written, or an io_result. IO_WANT_READ: the write can go on
     * only once the socket is readable (TLS). A write that returned IO_WANT_*
     * must be retried with the same bytes. */
    ssize_t (*write)(struct sock *s, const char *buf, size_t len);
    /* Bytes already read from the socket but not yet returned (TLS records). */
    size_t (*pending)(struct sock *s);
    /* Before the socket is closed. */
    void (*close)(struct sock *s);
    /* When the connection slot is freed: drop what the transport keeps across
     * reconnects. */
    void (*release)(struct sock *s);
    /* Why the handshake, a read or a write failed; NULL when errno says
     * (TCP), or the TLS handshake failed. */
    enum cause (*cause)(struct sock *s);
};

extern const struct transport transport_plain;

#endif
