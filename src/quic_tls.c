/* QUIC's TLS through GnuTLS: the run's credentials and each connection's
 * session, with resumption from the slot's newest ticket.
 * SPDX-License-Identifier: MIT */
#include "quic_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* TLS 1.3 only, with the AEADs QUIC uses (RFC 9001 §5.3). */
static const char priority_string[] =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"
    "+AES-128-CCM:%DISABLE_TLS13_COMPAT_MODE";
static const gnutls_datum_t alpn_h3 = {(unsigned char *)"h3", 2};

/* Set up once by quic_tls_setup before the workers start, only read after. */
static struct {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t priority;
    char *sni;         /* the server name to send, or NULL (IP literals get none) */
    char *verify_name; /* with --verify: the name the certificate must carry */
    bool early_data;   /* --0rtt */
} run;

static bool is_ip_literal(const char *host)
{
    unsigned char addr[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

static void check_readable(const char *option, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("%s %s: %s", option, path, strerror(errno));
    fclose(f);
}

void quic_tls_setup(const struct quic_tls_options *o)
{
    int rv;
    if (gnutls_certificate_allocate_credentials(&run.cred) != 0 ||
        gnutls_priority_init(&run.priority, priority_string, NULL) != 0)
        die("unable to initialize TLS for HTTP/3");
    const char *name = o->sni ? o->sni : o->host;
    if (o->sni && (!*o->sni || strlen(o->sni) > 255))
        die("--sni '%s': a server name has 1 to 255 characters", o->sni);
    run.sni = (o->sni || !is_ip_literal(name)) ? xstrdup(name) : NULL;
    if (o->verify) {
        run.verify_name = xstrdup(name);
        /* No system store is not an error: --cacert may be all there is. */
        gnutls_certificate_set_x509_system_trust(run.cred);
        if (o->cacert) {
            check_readable("--cacert", o->cacert);
            rv = gnutls_certificate_set_x509_trust_file(run.cred, o->cacert, GNUTLS_X509_FMT_PEM);
            if (rv <= 0)
                die("--cacert %s: no PEM certificate in it", o->cacert);
        }
    }
    if (o->cert) {
        const char *key = o->key ? o->key : o->cert;
        check_readable("--cert", o->cert);
        check_readable(o->key ? "--key" : "--cert", key);
        rv = gnutls_certificate_set_x509_key_file(run.cred, o->cert, key, GNUTLS_X509_FMT_PEM);
        if (rv < 0)
            die("%s %s: %s", o->key ? "--key" : "--cert", key,
                rv == GNUTLS_E_CERTIFICATE_KEY_MISMATCH
                    ? "the private key does not match the certificate"
                    : "no PEM certificate and unencrypted private key in it");
    }
    run.early_data = o->early_data;
}

void quic_tls_cleanup(void)
{
    if (run.cred)
        gnutls_certificate_free_credentials(run.cred);
    if (run.priority)
        gnutls_priority_deinit(run.priority);
    free(run.sni);
    free(run.verify_name);
    memset(&run, 0, sizeof run);
}

/* TLS 1.3 sends tickets after the handshake, whenever the server likes: the
 * slot keeps the newest, to resume (and with --0rtt, send early data). */
static int on_ticket(gnutls_session_t session, unsigned htype, unsigned when, unsigned incoming,
                     const gnutls_datum_t *msg)
{
    (void)htype, (void)when, (void)incoming, (void)msg;
    ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(session);
    struct quic_tls *t = (struct quic_tls *)(void *)((char *)ref - offsetof(struct quic_tls, ref));
    gnutls_datum_t data;
    if (gnutls_session_get_data2(session, &data) != 0)
        return 0;
    gnutls_free(t->ticket.data);
    t->ticket = data;
    return 0;
}

bool quic_tls_start(struct quic_tls *t, ngtcp2_crypto_get_conn get_conn, void *user_data)
{
    /* Early data only with --0rtt: GnuTLS would otherwise offer it on every
     * resumption, and servers would take 0-RTT that never comes. */
    unsigned flags = GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA | GNUTLS_NONBLOCK;
    if (gnutls_init(&t->session, flags | (run.early_data ? GNUTLS_ENABLE_EARLY_DATA : 0)) != 0)
        return false;
    if (ngtcp2_crypto_gnutls_configure_client_session(t->session) != 0 ||
        gnutls_priority_set(t->session, run.priority) != 0 ||
        gnutls_credentials_set(t->session, GNUTLS_CRD_CERTIFICATE, run.cred) != 0 ||
        gnutls_alpn_set_protocols(t->session, &alpn_h3, 1, GNUTLS_ALPN_MANDATORY) != 0)
        return false;
    if (run.sni &&
        gnutls_server_name_set(t->session, GNUTLS_NAME_DNS, run.sni, strlen(run.sni)) != 0)
        return false;
    if (run.verify_name)
        gnutls_session_set_verify_cert(t->session, run.verify_name, 0);
    t->ref.get_conn = get_conn;
    t->ref.user_data = user_data;
    gnutls_session_set_ptr(t->session, &t->ref);
    gnutls_handshake_set_hook_function(t->session, GNUTLS_HANDSHAKE_NEW_SESSION_TICKET,
                                       GNUTLS_HOOK_POST, on_ticket);
    /* A ticket the server no longer takes only costs a full handshake. */
    if (t->ticket.size)
        gnutls_session_set_data(t->session, t->ticket.data, t->ticket.size);
    return true;
}

void quic_tls_end(struct quic_tls *t)
{
    if (t->session)
        gnutls_deinit(t->session);
    t->session = NULL;
}

void quic_tls_free(struct quic_tls *t)
{
    quic_tls_end(t);
    gnutls_free(t->ticket.data);
    t->ticket = (gnutls_datum_t){0};
}

bool quic_tls_resumed(const struct quic_tls *t)
{
    return t->session && gnutls_session_is_resumed(t->session);
}

bool quic_tls_may_send_early(const struct quic_tls *t) { return run.early_data && t->ticket.size; }

bool quic_tls_early_taken(const struct quic_tls *t)
{
    return gnutls_session_get_flags(t->session) & GNUTLS_SFLAGS_EARLY_DATA;
}

bool quic_tls_why(const struct quic_tls *t, bool has_alert, unsigned alert, char *why, size_t len)
{
    unsigned status = t->session ? gnutls_session_get_verify_cert_status(t->session) : 0;
    if (status && run.verify_name) {
        gnutls_datum_t out;
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
            snprintf(why, len, "certificate verification failed: %s", (const char *)out.data);
            gnutls_free(out.data);
            return true;
        }
    }
    if (!has_alert)
        return false;
    const char *name = gnutls_alert_get_name((gnutls_alert_description_t)alert);
    snprintf(why, len, "TLS alert %u (%s)%s", alert, name ? name : "unknown",
             alert == 120 ? ": the server does not speak HTTP/3 (ALPN h3)" : "");
    return true;
}
