/* Through a proxy: what a connection says to it after its TCP connect and
 * before its transport's handshake, so that the bytes after are the
 * target's: an HTTP CONNECT (RFC 9110 §9.3.6) or a SOCKS5 CONNECT (RFC 1928,
 * with RFC 1929's user name and password). The messages are built once for
 * the run; a connection keeps only how far it got.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_TUNNEL_H
#define VOLLEY_TUNNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"

struct net_addr;

enum tunnel_kind {
    TUNNEL_HTTP,   /* CONNECT host:port */
    TUNNEL_SOCKS5, /* SOCKS5 CONNECT to an address, or to a name the proxy resolves */
};

/* The run's tunnel, read-only once built. */
struct tunnel {
    enum tunnel_kind kind;
    char *request; /* CONNECT: the request; SOCKS5: the CONNECT request */
    size_t request_len;
    char *auth; /* SOCKS5: the user name and password request (RFC 1929), or NULL */
    size_t auth_len;
    char *target; /* "host:port", for messages */
};

/* Where one attempt is: zeroed before it starts (tunnel_begin). */
struct tunnel_conn {
    uint8_t step;
    uint8_t eol;     /* CONNECT: how the bytes read so far end (a line's end, an empty line's) */
    uint16_t done;   /* bytes of the message being written, or of the answer read */
    uint16_t need;   /* SOCKS5: bytes of the answer still to read */
    uint16_t status; /* the CONNECT answer's status, or the SOCKS5 reply code */
    char head[12];   /* the start of the answer */
};

/* CONNECT to host:service (a host with ':' is an IPv6 literal, bracketed
 * there), with Basic credentials when user is not NULL. */
void tunnel_http(struct tunnel *t, const char *host, const char *service, const char *user,
                 const char *password);
/* SOCKS5 CONNECT to addr (resolved here), or with addr NULL to host by name
 * (resolved by the proxy: socks5h). False when a name or a credential is
 * longer than SOCKS5 carries (255 bytes), with the reason in why. */
bool tunnel_socks5(struct tunnel *t, const char *host, const char *service,
                   const struct net_addr *addr, const char *user, const char *password,
                   const char **why);
void tunnel_free(struct tunnel *t);

static inline void tunnel_begin(struct tunnel_conn *tc) { *tc = (struct tunnel_conn){0}; }
/* Go on with the set-up on the connected non-blocking socket fd: IO_OK once
 * the tunnel is up, IO_WANT_READ or IO_WANT_WRITE to wait, IO_ERROR with the
 * cause in *cause (and the status or reply code in tc->status). */
int tunnel_step(const struct tunnel *t, struct tunnel_conn *tc, int fd, enum cause *cause);
/* The whole set-up, waited on in place until deadline (clock_us), for the
 * checks before the run: IO_OK, IO_ERROR as tunnel_step says it, or
 * IO_WANT_* when the deadline came first. */
int tunnel_wait(const struct tunnel *t, struct tunnel_conn *tc, int fd, uint64_t deadline,
                enum cause *cause);
/* What failed, for a one-line message at start-up: "the proxy answered
 * CONNECT with status 403". */
void tunnel_failure(const struct tunnel *t, const struct tunnel_conn *tc, enum cause cause,
                    char *buf, size_t len);

#endif
