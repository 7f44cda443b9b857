/* The plain transport: bytes straight to and from the socket (TCP or Unix).
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport.h"

static int plain_handshake(struct sock *s)
{
    (void)s;
    return IO_OK;
}

static bool plain_resumed(struct sock *s)
{
    (void)s;
    return false;
}

static const char *plain_alpn(struct sock *s, size_t *len)
{
    (void)s;
    *len = 0;
    return NULL;
}

static ssize_t plain_read(struct sock *s, char *buf, size_t len)
{
    ssize_t n;
    while ((n = read(s->fd, buf, len)) < 0 && errno == EINTR)
        ;
    if (n >= 0)
        return n;
    return errno == EAGAIN || errno == EWOULDBLOCK ? IO_WANT_READ : IO_ERROR;
}

static ssize_t plain_write(struct sock *s, const char *buf, size_t len)
{
    ssize_t n;
    /* MSG_NOSIGNAL: a peer that closed gives EPIPE, not SIGPIPE. */
    while ((n = send(s->fd, buf, len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n >= 0)
        return n;
    return errno == EAGAIN || errno == EWOULDBLOCK ? IO_WANT_WRITE : IO_ERROR;
}

static size_t plain_pending(struct sock *s)
{
    (void)s;
    return 0;
}

static void plain_close(struct sock *s) { (void)s; }

static void plain_release(struct sock *s) { (void)s; }

const struct transport transport_plain = {
    .ring = true,
    .handshake = plain_handshake,
    .resumed = plain_resumed,
    .alpn = plain_alpn,
    .read = plain_read,
    .write = plain_write,
    .pending = plain_pending,
    .close = plain_close,
    .release = plain_release,
};
