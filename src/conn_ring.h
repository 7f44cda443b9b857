/* A connection on the io_uring engine: what the ring tells it about its
 * socket, handed to the steps of the connection machine (conn.h) as the
 * epoll watchers' readiness is.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CONN_RING_H
#define VOLLEY_CONN_RING_H

#include <stddef.h>

struct conn;
struct uring;

/* The connection runs on ring from now on, as its slot index there. */
void conn_ring_init(struct conn *c, struct uring *ring, size_t index);

#endif
