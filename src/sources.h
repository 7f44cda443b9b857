/* Source addresses (--bind) and local ports (--bind-port-range): which
 * address each connection's socket is bound to before it connects, so that
 * a run holds more connections to one target than one address has ports.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SOURCES_H
#define VOLLEY_SOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"

/* A list may name at most this many addresses (a /16). */
#define SOURCES_MAX 65536

/* The run's source addresses, read-only once ready. */
struct sources {
    struct net_addr *addrs; /* each with port 0 */
    size_t n, cap;
    bool listed;     /* --bind named them (else one: the wildcard, for the port range) */
    uint16_t lo, hi; /* --bind-port-range, or 0 */
    bool own_ports;  /* the ports are bound here one by one, not chosen by the kernel */
};

/* What the connections did from one source address. */
struct sources_count {
    uint64_t connects; /* connections established */
    uint64_t errors;   /* attempts that failed to connect */
};

/* Where a worker looks for the next port of each address, with own_ports:
 * its own window of the range, so that no two workers (nor two shards of
 * the run) try the same ports. */
struct sources_ports {
    uint16_t from, to;   /* the window: ports from to to, both included */
    uint16_t *next;      /* per address, with own ports */
    bool *reuse;         /* per address, with own ports: none free of sockets, bind past them */
    uint64_t *full_at;   /* per address: when a search for its port last found none, or 0 */
    uint32_t *full_wait; /* per address: how long it is not searched again after that */
};

/* --bind LIST: addresses and CIDR ranges (127.0.0.0/28, 2001:db8::/120),
 * comma-separated, in order. An IPv4 range of more than two addresses
 * leaves out its first and last (the network's and its broadcast). False
 * with the reason in why. */
bool sources_parse(struct sources *s, const char *list, char *why, size_t len);
/* --bind-port-range LO-HI. */
bool sources_parse_ports(struct sources *s, const char *arg);
/* At start-up, for connections to an address of family: every address is
 * of that family and one of this machine's, and how ports are found is
 * settled. Exits with a one-line message otherwise. */
void sources_ready(struct sources *s, int family);
void sources_free(struct sources *s);

/* Whether the run's connections from one of the addresses (without --bind,
 * s NULL or not listed: the one the kernel picks) outnumber half the
 * kernel's ephemeral ports: the even half, which connect() takes first. */
bool sources_crowded(const struct sources *s, uint64_t connections);
/* A worker's window, for connections first..first+n-1 of the run's total;
 * s NULL without --bind and --bind-port-range (the address found full is
 * then the one the kernel picks). */
void sources_ports_init(struct sources_ports *p, const struct sources *s, uint64_t first,
                        uint64_t n, uint64_t total);
void sources_ports_free(struct sources_ports *p);

/* Bind the new socket fd (of a connection from address i) before it
 * connects. 0, or an errno value: EADDRNOTAVAIL for an address that is
 * not this machine's, EADDRINUSE when no port of the window was free. */
int sources_bind(const struct sources *s, struct sources_ports *p, size_t i, int fd);
/* Address i had no free port less than 100 ms ago (a search of
 * sources_bind, or the kernel's at connect(), found none), or less than
 * twice that when it was found full again as soon as it was searched (up
 * to 2 s): a connection from it fails at once, without searching again. */
bool sources_full(const struct sources_ports *p, size_t i, uint64_t now);
void sources_found_full(struct sources_ports *p, size_t i, uint64_t now);

/* "127.0.0.2" (no port). */
void sources_addr_text(const struct net_addr *a, char *buf, size_t len);

#endif
