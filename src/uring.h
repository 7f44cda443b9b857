/* The io_uring engine: a worker's connections that run on it move their
 * bytes through one ring per worker instead of readiness and system calls
 * of their own. A connection's socket receives into buffers the ring
 * provides (one multishot receive per socket), its sends are gathered and
 * submitted once per turn of the worker's loop, and the ring waits for its
 * connect and makes its close too; the ring tells the connection what
 * happened through a struct uring_sink. The ring's completions wake the worker's
 * libev loop through an eventfd, so its timers, the -R schedule and the
 * script's hooks run as they do over epoll.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_URING_H
#define VOLLEY_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ev_loop;
struct net_addr;
struct uring;

/* Whether this kernel (and this build) lets the workers run on io_uring,
 * with everything the engine uses; false with a one-line reason in why. */
bool uring_usable(char *why, size_t len);

/* What the ring tells a connection about its socket, each call given the
 * connection's arg. Nothing is told about a socket after uring_close(). */
struct uring_sink {
    /* The connect completed: err 0, or why it failed (an errno value). */
    void (*connected)(void *arg, int err);
    /* Bytes received at now (clock_us). */
    void (*input)(void *arg, const char *buf, size_t len, uint64_t now);
    /* The peer ended the stream. */
    void (*eof)(void *arg);
    /* Receiving failed (an errno value). */
    void (*read_failed)(void *arg, int err);
    /* The bytes to send next, or 0 when there are none: they stay as they
     * are until wrote() or write_failed(). */
    size_t (*output)(void *arg, const char **data);
    /* n bytes of output() went out. */
    void (*wrote)(void *arg, size_t n);
    /* Sending failed (an errno value). */
    void (*write_failed)(void *arg, int err);
};

/* A connection slot as the ring sees it: kept across reconnects. */
struct uring_link {
    struct uring *ring;
    const struct uring_sink *sink;
    void *arg;
    uint32_t index;            /* in the ring's table of links */
    uint32_t gen;              /* of the current socket: what the ring reports on an
                                  earlier one is dropped */
    int fd;                    /* the current socket, or -1 */
    bool connect_waits;        /* the connect's wait is for after the last send of
                                  the slot's earlier socket */
    bool receiving;            /* the socket's multishot receive is armed */
    bool sending;              /* a send is in flight (maybe an earlier socket's) */
    bool want_recv, want_send; /* for the next gathering */
    bool queued;               /* on the ring's list of links to gather */
    struct uring_link *next;   /* in that list */
};

/* The ring of a worker whose loop is loop, for links connection slots. Made
 * on the thread that builds the worker and started on the worker's own
 * (uring_start); dies with a one-line message if the kernel refuses it. */
struct uring *uring_new(struct ev_loop *loop, size_t links);
/* On the worker's thread, before its loop runs: the ring takes submissions
 * from this thread only. */
void uring_start(struct uring *r);
/* On the worker's thread once its connections are closed: submits their
 * closes and waits (a second at most) until the kernel is done with every
 * buffer the ring lent it. */
void uring_finish(struct uring *r);
void uring_free(struct uring *r);

void uring_link_init(struct uring_link *l, struct uring *r, size_t index,
                     const struct uring_sink *sink, void *arg);
/* The new socket fd (non-blocking) has its connect under way, or done
 * already: sink->connected() says how it went. */
void uring_connect(struct uring_link *l, int fd);
/* The socket is set up: receive from it until it ends or is closed. */
void uring_receive(struct uring_link *l);
/* There is output: it goes with the turn's other sends. */
void uring_send(struct uring_link *l);
/* Close the socket: what is in flight on it is cancelled, and nothing more
 * of it is reported. */
void uring_close(struct uring_link *l);

#endif
