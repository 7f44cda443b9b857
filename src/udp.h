/* Datagrams over a connected UDP socket, in batches, for QUIC (quic.c):
 * in, one GRO batch (datagrams the kernel coalesced, all of one size but
 * the last) or as many datagrams as one recvmmsg() has; out, one sendmsg()
 * the kernel cuts into datagrams (GSO, UDP_SEGMENT) or one sendmmsg(). The
 * socket's options (buffers, Don't Fragment, GRO) are set when it opens;
 * ECN marks are read and sent only when asked for. What the kernel cannot
 * do (GSO, GRO) is learnt from its first refusal, for every socket after.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_UDP_H
#define VOLLEY_UDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"

/* A batch out: the kernel segments at most 64 datagrams
 * (UDP_MAX_SEGMENTS), in at most 64 KiB. */
#define UDP_BATCH_SEGMENTS 64
#define UDP_BATCH_BYTES (64 * 1024 - 512)
/* The largest datagram payload read (recvmmsg's slots are no smaller). */
#define UDP_PAYLOAD_MAX 1500
/* Datagrams one recvmmsg() takes where there is no GRO. */
#define UDP_RX_SLOTS 32
/* ECN's codepoints are the two low bits of the TOS or traffic class
 * (RFC 3168 §5). */
#define UDP_ECN_MASK 3

struct udp {
    int fd;
    bool v6;
    bool gro; /* the socket coalesces datagrams */
    bool ecn; /* marks are sent and read */
    int tos;  /* the marks the socket sends with, -1 unset */
    /* The last read: its datagrams' ECN marks (a GRO batch holds datagrams
     * of the same marks), and their lengths: rx_seg each but the last
     * (GRO), or rx_lens[i] each (recvmmsg, rx_n of them). */
    uint8_t rx_ecn;
    size_t rx_seg, rx_n;
    uint16_t rx_lens[UDP_RX_SLOTS];
};

/* u reads and writes fd, a connected UDP socket (over IPv6 when v6); with
 * ecn, it sends marks and reads those that come. */
void udp_open(struct udp *u, int fd, bool v6, bool ecn);

/* The datagrams waiting, one after the other in buf (len bytes, room for
 * UDP_PAYLOAD_MAX at least): how many bytes, or -1 with errno set. */
ssize_t udp_read(struct udp *u, char *buf, size_t len);

/* Where the next datagram of the last read's len bytes is: at *at, *n bytes
 * long; false past the last. c starts zeroed. */
struct udp_cursor {
    size_t i, off;
};
bool udp_next(const struct udp *u, struct udp_cursor *c, size_t len, size_t *at, size_t *n);

/* A batch of datagrams to send, made for one system call: all of one size
 * but the last, all with the same ECN marks, at most UDP_BATCH_SEGMENTS and
 * the batch's limit of bytes. A datagram that cannot join (larger than the
 * first, or marked otherwise) starts the next batch. */
struct udp_batch {
    /* end bytes to send, of datagrams seg bytes long but the last (count of
     * them, marked ecn), off of them sent; past end, the next batch's
     * first, marked carry_ecn. */
    struct buf buf;
    size_t off, end, seg, count, limit;
    uint8_t ecn, carry_ecn;
};

/* The next batch (once the last is sent), up to limit bytes in datagrams
 * of at most max bytes. */
void udp_batch_begin(struct udp_batch *b, size_t limit, size_t max);
/* Where the next datagram goes (max bytes of room), or NULL when the batch
 * is full. */
char *udp_batch_room(struct udp_batch *b);
/* The n bytes written at udp_batch_room() are a datagram marked ecn: false
 * when it cannot join the batch, which ends (it starts the next). */
bool udp_batch_add(struct udp_batch *b, size_t n, uint8_t ecn);
/* Nothing to send any more, and the memory given back. */
void udp_batch_clear(struct udp_batch *b);

/* Sends the datagrams of len bytes at data (seg bytes each but the last,
 * at most UDP_BATCH_SEGMENTS of them) with the ECN marks ecn: how many
 * bytes went (whole datagrams), or -1 with errno set. */
ssize_t udp_send(struct udp *u, const char *data, size_t len, size_t seg, uint8_t ecn);

#endif
