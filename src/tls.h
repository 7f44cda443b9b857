/* HTTPS: the TLS transport over OpenSSL, and the one client context every
 * connection of the run shares.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_TLS_H
#define VOLLEY_TLS_H

#include "transport.h"

struct config;
struct route;

extern const struct transport transport_tls;

/* Build the run's TLS context from the command line (versions, ALPN, SNI,
 * verification, client certificate) before any worker starts. Exits with a
 * one-line message when a certificate or key file cannot be used. */
void tls_setup(const struct config *cfg);

/* For an https URL: one blocking handshake to the target (along the run's
 * route: through its proxy), so that a server that cannot do TLS with
 * volley (no version in common, a client certificate it requires or
 * refuses, a port that is not HTTPS), a certificate that does not verify
 * (--verify) or a server that speaks none of the protocols offered
 * (--http2, --alpn) stops the run before it starts, with the reason. */
void tls_check(const struct config *cfg, const struct route *route);

/* After the workers are freed. */
void tls_cleanup(void);

#endif
