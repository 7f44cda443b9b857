/* How the connections reach the target: the address their sockets connect
 * to (the target's, or a proxy's), the source address each is bound to
 * (--bind), and the tunnel set up through a proxy between the TCP connect
 * and the transport's handshake. Built at start-up, read-only in the run.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_ROUTE_H
#define VOLLEY_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"
#include "stats.h"

struct sources;
struct sources_count;
struct sources_ports;
struct tunnel;

struct route {
    struct net_addr addr;          /* where sockets connect */
    const char *proxy;             /* addr is this proxy's (its URL, no credentials), or NULL */
    const struct tunnel *tunnel;   /* set up through the proxy first, or NULL */
    const struct sources *sources; /* source addresses and ports, or NULL */
    /* The run's connections from an address outnumber half the kernel's
     * ephemeral ports: its TCP sockets take their ports in order
     * (net_ports_in_order), as the even half cannot hold them. */
    bool ports_in_order;
};

/* The source address (its index in sources) of connection g of the run:
 * round-robin over the run's connections, whatever their thread or shard. */
size_t route_source(const struct route *r, uint64_t g);
/* --bind: connection g connected (or failed to), counted for its source
 * address in counts (one per address; NULL: not counted). */
void route_count(const struct route *r, struct sources_count *counts, uint64_t g, bool connected);
/* A non-blocking socket of type (SOCK_STREAM, SOCK_DGRAM) for connection g,
 * bound to its source address, and its connect started (ports: its
 * worker's). Returns the socket, with *in_progress telling whether the
 * connect is under way; or -1 with the cause in *cause (and errno set). A
 * source address found with no free port (--bind's, or the one the kernel
 * picks) fails at once for a while after, without a search. */
int route_open(const struct route *r, struct sources_ports *ports, uint64_t g, int type,
               bool *in_progress, enum cause *cause);
/* The cause of connection g's connect that failed with err once under way
 * (an address found without a free port is not searched again for a
 * while: sources_full). */
enum cause route_connect_cause(const struct route *r, struct sources_ports *ports, uint64_t g,
                               int err);

/* For the checks before the run: one connection as the run makes them,
 * ready for the transport's handshake (connected, through the tunnel),
 * before deadline (clock_us). Returns its socket, or -1 with the reason in
 * why, to follow "unable to connect to TARGET: " ("Connection refused",
 * "proxy http://127.0.0.1:3128: Connection refused", "the proxy answered
 * CONNECT with status 403"). */
int route_dial(const struct route *r, uint64_t deadline, char *why, size_t len);

#endif
