/* The plain transport: bytes straight to and from the socket (TCP or Unix).
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "transport.h"

static int plain_handshake(struct conn *c)
{
    (void)c;
    return IO_OK;
}

static ssize_t plain_read(struct conn *c, char *buf, size_t len)
{
    ssize_t n;
    while ((n = read(c->fd, buf, len)) < 0 && errno == EINTR)
        ;
    if (n >= 0)
        return n;
    return errno == EAGAIN || errno == EWOULDBLOCK ? IO_WANT_READ : IO_ERROR;
}

static ssize_t plain_write(struct conn *c, const char *buf, size_t len)
{
    ssize_t n;
    /* MSG_NOSIGNAL: a peer that closed gives EPIPE, not SIGPIPE. */
    while ((n = send(c->fd, buf, len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n >= 0)
        return n;
    return errno == EAGAIN || errno == EWOULDBLOCK ? IO_WANT_WRITE : IO_ERROR;
}

static size_t plain_pending(struct conn *c)
{
    (void)c;
    return 0;
}

static void plain_close(struct conn *c) { (void)c; }

static void plain_release(struct conn *c) { (void)c; }

const struct transport transport_plain = {
    .handshake = plain_handshake,
    .read = plain_read,
    .write = plain_write,
    .pending = plain_pending,
    .close = plain_close,
    .release = plain_release,
};
