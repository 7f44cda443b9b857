/* Batches of datagrams over a connected UDP socket: GRO or recvmmsg() in,
 * GSO or sendmmsg() out, ECN marks when asked for.
 * SPDX-License-Identifier: MIT */
#include "udp.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/* The socket's buffers: room for a burst of the flow-control windows QUIC
 * opens to the server (quic.c), forced past net.core.rmem_max where volley
 * may (CAP_NET_ADMIN), else as large as the limit allows. */
#define UDP_SOCKET_BUFFER (4 * 1024 * 1024)

/* Whether sendmsg() takes UDP_SEGMENT and the socket UDP_GRO: learnt from the
 * first refusal, for every socket after it. */
static atomic_bool no_gso, no_gro;

static void size_buffers(int fd)
{
    int n = UDP_SOCKET_BUFFER;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &n, sizeof n) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof n);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &n, sizeof n) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof n);
}

void udp_open(struct udp *u, int fd, bool v6, bool ecn)
{
    int one = 1;
    *u = (struct udp){.fd = fd, .v6 = v6, .ecn = ecn, .tos = -1};
    size_buffers(fd);
    u->gro = !atomic_load(&no_gro) && setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) == 0;
    if (!u->gro)
        atomic_store(&no_gro, true);
    /* QUIC needs the Don't Fragment bit (RFC 9000 §14): a datagram too large
     * for the path is lost, not cut into fragments. ECN stays off unless
     * asked for: then the marks of what comes in are read. */
    int pmtu = IP_PMTUDISC_DO;
    if (v6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu);
    else
        setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    if (ecn)
        setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_RECVTCLASS : IP_RECVTOS, &one,
                   sizeof one);
}

/* The marks of a datagram, from IP_TOS or IPV6_TCLASS. */
static void read_tos(struct udp *u, const struct cmsghdr *c)
{
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1)) {
        u->rx_ecn = *(const uint8_t *)CMSG_DATA(c) & UDP_ECN_MASK;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS &&
               c->cmsg_len >= CMSG_LEN(sizeof(int))) {
        int tclass;
        memcpy(&tclass, CMSG_DATA(c), sizeof tclass);
        u->rx_ecn = (uint8_t)(tclass & UDP_ECN_MASK);
    }
}

/* One GRO batch: datagrams of one size (the last maybe shorter), their
 * size in the control message. */
static ssize_t read_gro(struct udp *u, char *buf, size_t len)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int)) * 2];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    ssize_t n = recvmsg(u->fd, &msg, MSG_DONTWAIT);
    if (n < 0)
        return -1;
    u->rx_seg = (size_t)n;
    u->rx_ecn = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
            int seg;
            memcpy(&seg, CMSG_DATA(c), sizeof seg);
            if (seg > 0)
                u->rx_seg = (size_t)seg;
        } else {
            read_tos(u, c);
        }
    }
    u->rx_n = 0;
    return n;
}

/* As many datagrams as recvmmsg() has, packed one after the other. */
static ssize_t read_mmsg(struct udp *u, char *buf, size_t len)
{
    struct mmsghdr msgs[UDP_RX_SLOTS];
    struct iovec iov[UDP_RX_SLOTS];
    size_t slots = len / UDP_PAYLOAD_MAX;
    if (slots > UDP_RX_SLOTS)
        slots = UDP_RX_SLOTS;
    if (slots == 0)
        slots = 1;
    size_t slot = len / slots;
    memset(msgs, 0, sizeof msgs[0] * slots);
    for (size_t i = 0; i < slots; i++) {
        iov[i] = (struct iovec){.iov_base = buf + i * slot, .iov_len = slot};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int got = recvmmsg(u->fd, msgs, (unsigned)slots, MSG_DONTWAIT, NULL);
    if (got < 0)
        return -1;
    size_t n = 0;
    for (int i = 0; i < got; i++) {
        size_t k = msgs[i].msg_len;
        memmove(buf + n, buf + (size_t)i * slot, k);
        u->rx_lens[i] = (uint16_t)k;
        n += k;
    }
    u->rx_n = (size_t)got;
    u->rx_seg = 0;
    u->rx_ecn = 0; /* the marks are read from GRO batches only */
    return (ssize_t)n;
}

ssize_t udp_read(struct udp *u, char *buf, size_t len)
{
    return u->gro ? read_gro(u, buf, len) : read_mmsg(u, buf, len);
}

bool udp_next(const struct udp *u, struct udp_cursor *c, size_t len, size_t *at, size_t *n)
{
    if (c->off >= len || (u->rx_n && c->i >= u->rx_n))
        return false;
    if (u->rx_n) {
        *n = u->rx_lens[c->i++];
    } else {
        size_t seg = u->rx_seg ? u->rx_seg : len;
        *n = len - c->off < seg ? len - c->off : seg;
    }
    *at = c->off;
    c->off += *n;
    return true;
}

/* The batch with sendmmsg(), a datagram per message. */
static ssize_t send_mmsg(struct udp *u, const char *data, size_t len, size_t seg)
{
    struct mmsghdr msgs[UDP_BATCH_SEGMENTS];
    struct iovec iov[UDP_BATCH_SEGMENTS];
    unsigned k = 0;
    for (size_t off = 0; off < len && k < UDP_BATCH_SEGMENTS; off += seg, k++) {
        iov[k] = (struct iovec){.iov_base = (char *)data + off,
                                .iov_len = len - off < seg ? len - off : seg};
        msgs[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[k], .msg_iovlen = 1}};
    }
    int sent = sendmmsg(u->fd, msgs, k, MSG_DONTWAIT);
    if (sent == 0)
        errno = EAGAIN;
    if (sent <= 0)
        return -1;
    size_t n = 0;
    for (int i = 0; i < sent; i++)
        n += iov[i].iov_len;
    return (ssize_t)n;
}

/* The same with one sendmsg() the kernel segments (UDP_SEGMENT). */
static ssize_t send_gso(struct udp *u, const char *data, size_t len, size_t seg)
{
    struct iovec iov = {.iov_base = (char *)data, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (len > seg) {
        memset(&control, 0, sizeof control);
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t size = (uint16_t)seg;
        memcpy(CMSG_DATA(c), &size, sizeof size);
    }
    ssize_t n = sendmsg(u->fd, &msg, MSG_DONTWAIT);
    if (n >= 0)
        return (ssize_t)len;
    /* A kernel or device without UDP segmentation: sendmmsg from now on. */
    if (len > seg && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)) {
        atomic_store(&no_gso, true);
        return send_mmsg(u, data, len, seg);
    }
    return -1;
}

/* The socket sends with the batch's marks: one system call when they
 * change (QUIC marks every packet alike once the path is validated). */
static void mark(struct udp *u, uint8_t ecn)
{
    if (!u->ecn || u->tos == ecn)
        return;
    int tos = ecn;
    if (u->v6)
        setsockopt(u->fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
    else
        setsockopt(u->fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    u->tos = tos;
}

ssize_t udp_send(struct udp *u, const char *data, size_t len, size_t seg, uint8_t ecn)
{
    mark(u, ecn);
    return atomic_load(&no_gso) ? send_mmsg(u, data, len, seg) : send_gso(u, data, len, seg);
}

void udp_batch_begin(struct udp_batch *b, size_t limit, size_t max)
{
    size_t carry = b->buf.len - b->end;
    if (carry) {
        memmove(b->buf.data, b->buf.data + b->end, carry);
        b->ecn = b->carry_ecn;
    }
    b->buf.len = b->end = b->seg = carry;
    b->count = carry ? 1 : 0;
    b->off = 0;
    b->limit = limit;
    buf_reserve(&b->buf, limit + max);
}

char *udp_batch_room(struct udp_batch *b)
{
    /* After a datagram shorter than the first, the batch is over. */
    if (b->count && (b->count == UDP_BATCH_SEGMENTS || b->end + b->seg > b->limit ||
                     b->end != b->count * b->seg))
        return NULL;
    return b->buf.data + b->end;
}

bool udp_batch_add(struct udp_batch *b, size_t n, uint8_t ecn)
{
    if (b->count && (n > b->seg || ecn != b->ecn)) {
        b->buf.len = b->end + n;
        b->carry_ecn = ecn;
        return false;
    }
    if (b->count++ == 0) {
        b->seg = n;
        b->ecn = ecn;
    }
    b->end += n;
    b->buf.len = b->end;
    return true;
}

void udp_batch_clear(struct udp_batch *b)
{
    buf_reset(&b->buf, 0);
    b->off = b->end = b->seg = b->count = 0;
}
