/* The seam between a connection and the bytes on its socket: plain TCP or
 * Unix sockets, or TLS. A connection calls these and never the syscalls.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_TRANSPORT_H
#define VOLLEY_TRANSPORT_H

#include <stddef.h>
#include <sys/types.h>

struct conn;

/* Results below zero from the calls below. */
enum io_result {
    IO_OK = 0,
    IO_ERROR = -1,      /* failed; errno or the connection's cause says why */
    IO_WANT_READ = -2,  /* try again when the socket is readable */
    IO_WANT_WRITE = -3, /* try again when the socket is writable */
};

struct transport {
    /* After the TCP connect: finish setting up (the TLS handshake). IO_OK when
     * ready to send, IO_WANT_* to wait, IO_ERROR when it failed. */
    int (*handshake)(struct conn *c);
    /* > 0 bytes read, 0 at end of stream, or an io_result. */
    ssize_t (*read)(struct conn *c, char *buf, size_t len);
    /* > 0 bytes written, or an io_result. */
    ssize_t (*write)(struct conn *c, const char *buf, size_t len);
    /* Bytes already read from the socket but not yet returned (TLS records). */
    size_t (*pending)(struct conn *c);
    /* Before the socket is closed. */
    void (*close)(struct conn *c);
    /* When the connection is freed: drop what the transport keeps across
     * reconnects (the TLS session it resumes). */
    void (*release)(struct conn *c);
};

extern const struct transport transport_plain;

#endif
