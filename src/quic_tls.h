/* QUIC's TLS 1.3, through GnuTLS for ngtcp2's crypto helper (quic.c): the
 * run's credentials, set up once from the command line (--verify,
 * --cacert, --cert, --key, --sni), and each connection's GnuTLS session
 * (ALPN h3, the server's name, the name its certificate must carry),
 * resuming from the newest session ticket its slot kept, with early data
 * under --0rtt.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_QUIC_TLS_H
#define VOLLEY_QUIC_TLS_H

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stdbool.h>
#include <stddef.h>

/* What the run asks of TLS over QUIC (from the command line). */
struct quic_tls_options {
    const char *host;   /* the URL's host: SNI (when a name) and the name verified */
    const char *sni;    /* --sni, or NULL */
    bool verify;        /* --verify */
    const char *cacert; /* --cacert, or NULL */
    const char *cert, *key;
    bool early_data; /* --0rtt */
};

/* A connection slot's TLS. */
struct quic_tls {
    gnutls_session_t session;   /* the current connection's, or NULL */
    ngtcp2_crypto_conn_ref ref; /* how ngtcp2's crypto helper finds the connection */
    gnutls_datum_t ticket;      /* kept across reconnects: the newest ticket's session data */
};

/* Builds the run's credentials. Exits with a one-line message when a
 * certificate or key file cannot be used. */
void quic_tls_setup(const struct quic_tls_options *o);
void quic_tls_cleanup(void);

/* A session for a new connection of t's slot, which ngtcp2's helper finds
 * through get_conn(&t->ref), ref's user_data set to user_data; false when
 * GnuTLS refused. */
bool quic_tls_start(struct quic_tls *t, ngtcp2_crypto_get_conn get_conn, void *user_data);
/* The connection is gone: its session too. */
void quic_tls_end(struct quic_tls *t);
/* The slot is gone: what it kept too. */
void quic_tls_free(struct quic_tls *t);

/* Whether the session resumed one of an earlier connection. */
bool quic_tls_resumed(const struct quic_tls *t);
/* Whether the next handshake may send early data: --0rtt, with a ticket. */
bool quic_tls_may_send_early(const struct quic_tls *t);
/* After the handshake: whether the server took the early data. */
bool quic_tls_early_taken(const struct quic_tls *t);
/* Why the handshake failed, in words, into why: the certificate's
 * verification under --verify, or the alert (when has_alert); false when
 * it was neither. */
bool quic_tls_why(const struct quic_tls *t, bool has_alert, unsigned alert, char *why, size_t len);

#endif
