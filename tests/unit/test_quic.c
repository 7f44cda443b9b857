/* Unit tests for src/quic.c's start-up check against UDP sockets of the
 * test's own on 127.0.0.1: what a client Initial looks like on the wire
 * (padded to 1200 bytes at least, RFC 9000 §14.1, and the QUIC v1 long
 * header), that it is sent again when nothing answers, that garbage in reply
 * is dropped rather than believed, and the one-line reasons the check gives.
 * The handshake itself, and everything after it, runs against real servers
 * in tests/integration/test_h3.py.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "quic.h"
#include "quic_start.h"

/* A UDP socket on 127.0.0.1 that records what it receives and, if told,
 * answers every datagram with as many bytes of garbage. */
struct peer {
    int fd;
    struct net_addr addr;
    bool garbage;
    size_t datagrams, smallest;
    unsigned char first[64];
    size_t first_len;
    pthread_t thread;
    volatile bool stop;
};

static void *serve(void *arg)
{
    struct peer *p = arg;
    unsigned char buf[65536];
    while (!p->stop) {
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        struct sockaddr_storage from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(p->fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        if (n <= 0)
            continue;
        if (p->datagrams++ == 0) {
            p->first_len = (size_t)n < sizeof p->first ? (size_t)n : sizeof p->first;
            memcpy(p->first, buf, p->first_len);
        }
        if (!p->smallest || (size_t)n < p->smallest)
            p->smallest = (size_t)n;
        if (p->garbage) {
            for (ssize_t i = 0; i < n; i++)
                buf[i] = (unsigned char)(i * 7 + 3);
            sendto(p->fd, buf, (size_t)n, 0, (struct sockaddr *)&from, len);
        }
    }
    return NULL;
}

static void peer_start(struct peer *p, bool garbage)
{
    memset(p, 0, sizeof *p);
    p->garbage = garbage;
    p->fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in *in = (struct sockaddr_in *)&p->addr.sa;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    p->addr.len = sizeof *in;
    CHECK(bind(p->fd, (struct sockaddr *)in, sizeof *in) == 0);
    CHECK(getsockname(p->fd, (struct sockaddr *)&p->addr.sa, &p->addr.len) == 0);
    pthread_create(&p->thread, NULL, serve, p);
}

static void peer_stop(struct peer *p)
{
    p->stop = true;
    pthread_join(p->thread, NULL);
    close(p->fd);
}

static void setup(void)
{
    static bool done;
    if (!done)
        quic_setup(&(struct quic_options){.tls.host = "127.0.0.1"});
    done = true;
}

TEST(quic_initial_is_padded_and_sent_again)
{
    struct peer p;
    char why[256];
    setup();
    peer_start(&p, false);
    /* The default initial RTT (333 ms) puts the first retransmission at
     * about 1 s (RFC 9002 §6.2.1). */
    CHECK(!quic_probe(&p.addr, 1500, why, sizeof why));
    peer_stop(&p);
    CHECK_STR(why, "no QUIC handshake in 1500ms");
    CHECK(p.datagrams >= 2);
    CHECK(p.smallest >= 1200);
    /* A long header (0b11) Initial (type 0) of QUIC version 1. */
    CHECK(p.first_len >= 5 && (p.first[0] & 0xf0) == 0xc0);
    CHECK(p.first[1] == 0 && p.first[2] == 0 && p.first[3] == 0 && p.first[4] == 1);
}

TEST(quic_garbage_in_reply_is_dropped)
{
    struct peer p;
    char why[256];
    setup();
    peer_start(&p, true);
    CHECK(!quic_probe(&p.addr, 300, why, sizeof why));
    peer_stop(&p);
    CHECK_STR(why, "no QUIC handshake in 300ms");
    CHECK(p.datagrams >= 1);
}

TEST(quic_closed_port_is_refused)
{
    struct peer p;
    char why[256];
    setup();
    peer_start(&p, false);
    peer_stop(&p); /* the port is free again: ICMP port unreachable */
    CHECK(!quic_probe(&p.addr, 2000, why, sizeof why));
    CHECK_STR(why, "Connection refused");
}
