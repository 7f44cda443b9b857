/* Sockets: resolving and probing the target at start-up, non-blocking
 * connects during the run, and the open-file limit.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_NET_H
#define VOLLEY_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct net_addr {
    struct sockaddr_storage sa;
    socklen_t len;
};

/* getaddrinfo(host, service) for stream sockets. On failure returns false
 * and *err names the reason (gai_strerror). Caller frees *addrs. */
bool net_lookup(const char *host, const char *service, struct net_addr **addrs, size_t *n,
                const char **err);
/* A Unix domain socket address; false if the path is too long. */
bool net_unix_addr(const char *path, struct net_addr *a);
/* Connect and close at once, waiting at most timeout_ms; 0 on success or an
 * errno value. */
int net_probe(const struct net_addr *a, int timeout_ms);

/* Start a non-blocking connect (TCP_NODELAY on TCP). Returns the socket, with
 * *in_progress telling whether the connect is still under way; or -1 with errno set. */
int net_connect(const struct net_addr *a, bool *in_progress);
/* The same in two steps, for a socket bound in between: a non-blocking
 * socket for a (-1 with errno set), then its connect (false with errno set,
 * the socket closed). */
int net_socket(const struct net_addr *a);
bool net_start_connect(int fd, const struct net_addr *a, bool *in_progress);
/* The outcome of a connect that was in progress: 0 or an errno value. */
int net_connect_error(int fd);
/* Wait until fd is ready for events (poll's), or until deadline (clock_us);
 * false when the deadline passed first. For start-up checks. */
bool net_wait(int fd, short events, uint64_t deadline);

/* "127.0.0.1:8080", "::1:8080" (wrk's form: IPv6 without brackets), or the
 * socket path. Caller frees. */
char *net_addr_str(const struct net_addr *a);

/* Raise RLIMIT_NOFILE's soft limit as far as the hard limit allows; returns
 * the resulting soft limit. */
uint64_t net_raise_nofile(void);

#endif
