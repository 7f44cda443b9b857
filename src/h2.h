/* HTTP/2 beside its session (proto_h2, in proto.h): the start-up check of a
 * cleartext target.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_H2_H
#define VOLLEY_H2_H

struct config;
struct net_addr;

/* --http2 over cleartext (prior knowledge): the target must answer the
 * connection preface as an HTTP/2 server. One that answers it with an
 * HTTP/1.1 response stops volley with one line, as a TLS server that
 * refuses ALPN h2 does in tls_check. */
void h2_check(const struct config *cfg, const struct net_addr *addr);

#endif
