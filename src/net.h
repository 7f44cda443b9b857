/* Sockets: resolving and probing the target at start-up, non-blocking
 * connects during the run, and the open-file limit.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_NET_H
#define VOLLEY_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifndef IP_LOCAL_PORT_RANGE
#define IP_LOCAL_PORT_RANGE 51
#endif

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

/* A non-blocking socket of this type for a (SOCK_STREAM, with TCP_NODELAY on
 * TCP; or SOCK_DGRAM), to connect; or -1 with errno set. */
int net_socket(const struct net_addr *a, int type);
/* Have connect() take the TCP socket fd's local port in order from the
 * whole ephemeral range, not the even ports first (see net.c). */
void net_ports_in_order(int fd);
/* Start a non-blocking connect of a socket of this type (SOCK_STREAM, with
 * TCP_NODELAY on TCP; or SOCK_DGRAM, connected to the address at once).
 * Returns the socket, with *in_progress telling whether the connect is still
 * under way; or -1 with errno set. */
int net_connect(const struct net_addr *a, int type, bool *in_progress);
/* The connect of net_connect on a socket of net_socket's (bound in
 * between): false with errno set, the socket closed. */
bool net_start_connect(int fd, const struct net_addr *a, bool *in_progress);
/* The outcome of a connect that was in progress: 0 or an errno value. */
int net_connect_error(int fd);
/* Wait until fd is ready for events (poll's), or until deadline (clock_us);
 * false when the deadline passed first. For start-up checks. */
bool net_wait(int fd, short events, uint64_t deadline);

/* "127.0.0.1:8080", "::1:8080" (wrk's form: IPv6 without brackets), or the
 * socket path. Caller frees. */
char *net_addr_str(const struct net_addr *a);

/* A listening address as typed: "HOST:PORT", "[IPV6]:PORT" or ":PORT" (every
 * interface). On success *host (NULL for every interface) and *port are
 * allocated; on failure *why says what is wrong. The port is 1 to 65535. */
bool net_parse_listen(const char *s, char **host, char **port, const char **why);
/* A non-blocking TCP socket listening at what net_parse_listen gave (every
 * interface: IPv6 and IPv4 where the system has IPv6); -1 with *why set
 * (errno's text, or the resolver's) when none can be opened. */
int net_listen(const char *host, const char *port, const char **why);

/* Raise RLIMIT_NOFILE's soft limit as far as the hard limit allows; returns
 * the resulting soft limit. */
uint64_t net_raise_nofile(void);

#endif
