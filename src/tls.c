/* The TLS transport: OpenSSL over a connection's non-blocking socket, with
 * one SSL_CTX for the whole run (OpenSSL locks what it shares inside), one
 * SSL per TCP connection and, per connection slot, the newest session the
 * server gave, so that every reconnect costs a resumed handshake.
 * SPDX-License-Identifier: MIT */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "h1.h"
#include "net.h"
#include "route.h"
#include "stats.h"
#include "xalloc.h"

/* Set up once by tls_setup before the workers start, only read after. */
static struct {
    SSL_CTX *ctx;
    char *sni; /* the server name to send, or NULL (IP literals get none) */
} tls;

/* What a connection slot keeps: c->tls. */
struct tls_conn {
    SSL *ssl;             /* the current TCP connection's, or NULL */
    SSL_SESSION *session; /* the newest session the server gave, to resume */
    bool failed;          /* a fatal error: no close_notify may follow */
    enum tls_failure why; /* why the last handshake failed */
};

/* The reason OpenSSL gives for its last error, for one-line messages. */
static const char *ssl_reason(void)
{
    const char *why = ERR_reason_error_string(ERR_peek_last_error());
    return why ? why : "unknown error";
}

/* SSL_get_error reads the thread's OpenSSL error queue, and the socket's
 * errno: both must hold only what the call about to be made leaves there
 * (SSL_get_error(3)), so every call starts with them empty. */
static void before_call(void)
{
    ERR_clear_error();
    errno = 0;
}

/* Why a handshake failed, from SSL_get_error's err and the error queue:
 * an alert the server sent (its reason codes are the alert's, offset), or
 * what OpenSSL found wrong in what the server sent. */
static enum tls_failure why_failed(int err)
{
    if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN)
        return TLS_FAIL_CLOSED;
    unsigned long e = ERR_peek_last_error();
    if (err != SSL_ERROR_SSL || ERR_GET_LIB(e) != ERR_LIB_SSL)
        return TLS_FAIL_OTHER;
    int reason = ERR_GET_REASON(e);
    if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
        return stats_tls_alert_failure((unsigned)(reason - SSL_AD_REASON_OFFSET));
    switch (reason) {
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
        return TLS_FAIL_PROTOCOL_VERSION;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_HTTP_REQUEST:
        return TLS_FAIL_NOT_TLS;
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
        return TLS_FAIL_CERT_VERIFY;
    default:
        return TLS_FAIL_OTHER;
    }
}

static bool is_ip_literal(const char *host)
{
    unsigned char addr[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

/* ------------------------------------------------------------------------ */
/* The context                                                                */
/* ------------------------------------------------------------------------ */

/* TLS 1.3 sends tickets after the handshake, whenever the server likes, and
 * TLS 1.2 sessions are complete at its end: OpenSSL calls this each time
 * (client session caching on), so a slot always holds the newest session. */
static int on_new_session(SSL *ssl, SSL_SESSION *session)
{
    struct tls_conn *t = SSL_get_app_data(ssl);
    SSL_SESSION_free(t->session);
    t->session = session;
    return 1; /* the reference is ours */
}

/* An encrypted key would otherwise make OpenSSL prompt on the terminal. */
static int no_password(char *buf, int size, int rwflag, void *arg)
{
    (void)buf, (void)size, (void)rwflag, (void)arg;
    return 0;
}

static void check_readable(const char *option, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("%s %s: %s", option, path, strerror(errno));
    fclose(f);
}

static EVP_PKEY *read_key(const char *option, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("%s %s: %s", option, path, strerror(errno));
    EVP_PKEY *key = PEM_read_PrivateKey(f, NULL, no_password, NULL);
    fclose(f);
    if (!key)
        die("%s %s: no unencrypted PEM private key in it%s", option, path,
            strcmp(option, "--key") != 0 ? " (give the key with --key)" : "");
    return key;
}

/* --cert and --key (the key defaults to the certificate's file). OpenSSL's
 * reasons for unreadable PEM ("unsupported", "PEM lib") say little, so
 * the messages say what was expected instead. */
static void use_client_cert(SSL_CTX *ctx, const char *cert, const char *key_file)
{
    check_readable("--cert", cert);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        die("--cert %s: no PEM certificate in it", cert);
    const char *key_option = key_file == cert ? "--cert" : "--key";
    EVP_PKEY *key = read_key(key_option, key_file);
    ERR_clear_error();
    bool ok = SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(key);
    if (!ok)
        die("%s %s: the private key does not match the certificate in %s", key_option, key_file,
            cert);
}

/* --verify: the system's CAs plus --cacert's, and the name checked against
 * the certificate is the one the server is asked for. */
static void use_verification(SSL_CTX *ctx, const struct config *cfg, const char *name)
{
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* No system store is not an error: --cacert may be all there is. */
    SSL_CTX_set_default_verify_paths(ctx);
    if (cfg->cacert) {
        check_readable("--cacert", cfg->cacert);
        if (SSL_CTX_load_verify_locations(ctx, cfg->cacert, NULL) != 1)
            die("--cacert %s: no PEM certificate in it", cfg->cacert);
    }
    X509_VERIFY_PARAM *param = SSL_CTX_get0_param(ctx);
    int ok = is_ip_literal(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name)
                                 : X509_VERIFY_PARAM_set1_host(param, name, 0);
    if (ok != 1)
        die("--verify: cannot check the certificate against '%s'", name);
}

/* ALPN (RFC 7301): the protocols a connection may speak, in order, as a
 * list of length-prefixed ids. */
static void offer_alpn(SSL_CTX *ctx, const struct run_spec *spec)
{
    unsigned char list[256];
    size_t len = 0;
    for (size_t i = 0; i < spec->nprotocols; i++) {
        size_t n = strlen(spec->protocols[i]->alpn);
        list[len++] = (unsigned char)n;
        memcpy(list + len, spec->protocols[i]->alpn, n);
        len += n;
    }
    if (SSL_CTX_set_alpn_protos(ctx, list, (unsigned)len) != 0)
        die("unable to initialize TLS: %s", ssl_reason());
}

void tls_setup(const struct config *cfg)
{
    /* Held in tls at once: reachable, not leaked, if a check below exits. */
    SSL_CTX *ctx = tls.ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        die("unable to initialize TLS: %s", ssl_reason());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* A server may close without close_notify (nginx does after a keep-alive
     * timeout): the HTTP framing tells a complete response from a cut one,
     * as over plain TCP. OpenSSL 1.1.1 has no option for it: see tls_read. */
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    /* A load generator has no use for renegotiation, and refusing it keeps
     * reads from having to write in the middle of a response. */
#ifdef SSL_OP_NO_RENEGOTIATION
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
#endif
    /* Writes behave like send(); read-ahead takes whole records in one
     * read() instead of a header read and a body read for each. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1);
    offer_alpn(ctx, &cfg->spec);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    SSL_CTX_set_default_passwd_cb(ctx, no_password);

    const char *name = cfg->sni ? cfg->sni : cfg->url.host;
    if (cfg->sni && (!*cfg->sni || strlen(cfg->sni) > TLSEXT_MAXLEN_host_name))
        die("--sni '%s': a server name has 1 to %d characters", cfg->sni, TLSEXT_MAXLEN_host_name);
    tls.sni = (cfg->sni || !is_ip_literal(name)) ? xstrdup(name) : NULL;
    if (cfg->verify)
        use_verification(ctx, cfg, name);
    if (cfg->cert)
        use_client_cert(ctx, cfg->cert, cfg->key ? cfg->key : cfg->cert);
    ERR_clear_error();
}

void tls_cleanup(void)
{
    SSL_CTX_free(tls.ctx);
    free(tls.sni);
    tls.ctx = NULL;
    tls.sni = NULL;
}

static SSL *new_ssl(int fd)
{
    SSL *ssl = SSL_new(tls.ctx);
    /* Past tls_setup's checks only memory can run out here. */
    if (!ssl || SSL_set_fd(ssl, fd) != 1 ||
        (tls.sni && SSL_set_tlsext_host_name(ssl, tls.sni) != 1))
        die("unable to create a TLS connection: %s", ssl_reason());
    return ssl;
}

/* ------------------------------------------------------------------------ */
/* The start-up check                                                         */
/* ------------------------------------------------------------------------ */

/* What the server chose: one of the protocols offered (OpenSSL refuses a
 * handshake that chose another), or none, which is HTTP/1.1. Without
 * HTTP/1.1 among them, none is a server that does not speak what --http2
 * or --alpn asked for. */
static void check_alpn(const struct config *cfg, SSL *ssl, const char *host, const char *service)
{
    const unsigned char *chosen;
    unsigned int len;
    char names[128];
    SSL_get0_alpn_selected(ssl, &chosen, &len);
    if (len || spec_offers(&cfg->spec, &proto_h1))
        return;
    die("%s: %s:%s does not speak %s (it chose no protocol in ALPN)", cfg->protocol_option, host,
        service, spec_protocols_text(&cfg->spec, false, " or ", names, sizeof names));
}

/* What the start-up check adds to OpenSSL's reason, for the failures a
 * user can act on. */
static const char *hint(enum tls_failure why)
{
    switch (why) {
    case TLS_FAIL_PROTOCOL_VERSION:
        return " (volley speaks TLS 1.2 and 1.3)";
    case TLS_FAIL_NOT_TLS:
        return " (the server did not answer in TLS: is the port an HTTPS one?)";
    case TLS_FAIL_CERT_REQUIRED:
        return " (the server wants a client certificate: --cert)";
    case TLS_FAIL_CERT_REFUSED:
        return " (the server refused the client certificate)";
    default:
        return "";
    }
}

/* asked: the server asked for a client certificate, which TLS 1.2 servers
 * that require one and got none refuse with a plain handshake_failure. */
static void handshake_failed(SSL *ssl, const char *host, const char *service, int err, int saved,
                             bool asked) __attribute__((noreturn));
static void handshake_failed(SSL *ssl, const char *host, const char *service, int err, int saved,
                             bool asked)
{
    enum tls_failure why = why_failed(err);
    /* (without --verify the result is kept, though nothing checks it) */
    long verify = SSL_get_verify_result(ssl);
    if (SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE && verify != X509_V_OK)
        die("certificate verification failed for %s:%s: %s", host, service,
            X509_verify_cert_error_string(verify));
    die("TLS handshake with %s:%s failed: %s%s", host, service,
        err == SSL_ERROR_SSL ? ssl_reason()
        : saved              ? strerror(saved)
                             : "the server closed the connection",
        hint(why == TLS_FAIL_HANDSHAKE && asked ? TLS_FAIL_CERT_REQUIRED : why));
}

/* The server asked for a client certificate (a CertificateRequest). */
static int on_certificate_request(SSL *ssl, void *arg)
{
    (void)ssl;
    *(bool *)arg = true;
    return 1; /* the certificate configured, if any, goes as it is */
}

/* Under TLS 1.3 the client's handshake is over before the server has read
 * its certificate (RFC 8446 §4.4.2): a server that requires one and got
 * none, or refuses it, says so after, with an alert. Its session tickets
 * say it accepted; a server that sends none and stays silent until the
 * deadline is taken to have accepted too. */
static void await_verdict(SSL *ssl, int fd, const struct tls_conn *t, uint64_t deadline,
                          const char *host, const char *service, bool without_cert)
{
    char byte;
    for (;;) {
        before_call();
        int rc = SSL_peek(ssl, &byte, 1);
        /* reading took in the tickets, or the server spoke first */
        if (rc > 0 || t->session)
            return;
        int err = SSL_get_error(ssl, rc), saved = errno;
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
            if (!net_wait(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline))
                return;
            continue;
        }
        handshake_failed(ssl, host, service, err, saved, without_cert);
    }
}

void tls_check(const struct config *cfg, const struct route *route)
{
    const char *host = cfg->url.host, *service = cfg->url.service;
    char names[128], ids[128], why[256];
    uint64_t deadline = clock_us() + cfg->spec.timeout_us;
    struct tls_conn probe = {0};
    bool asked = false;
    int fd = route_dial(route, deadline, why, sizeof why);
    if (fd < 0)
        die("unable to connect to %s:%s: %s", host, service, why);
    SSL *ssl = new_ssl(fd);
    SSL_set_app_data(ssl, &probe);
    SSL_set_cert_cb(ssl, on_certificate_request, &asked);
    int rc;
    while (before_call(), (rc = SSL_connect(ssl)) != 1) {
        int err = SSL_get_error(ssl, rc), saved = errno;
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
            if (net_wait(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline))
                continue;
            die("TLS handshake with %s:%s failed: timed out", host, service);
        }
        if (cfg->protocol_option && err == SSL_ERROR_SSL &&
            ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL)
            die("%s: %s:%s does not speak %s (it refused ALPN %s)", cfg->protocol_option, host,
                service, spec_protocols_text(&cfg->spec, false, " or ", names, sizeof names),
                spec_protocols_text(&cfg->spec, true, ",", ids, sizeof ids));
        handshake_failed(ssl, host, service, err, saved, asked && !cfg->cert);
    }
    if (asked && SSL_version(ssl) >= TLS1_3_VERSION)
        await_verdict(ssl, fd, &probe, deadline, host, service, !cfg->cert);
    check_alpn(cfg, ssl, host, service);
    SSL_shutdown(ssl);
    SSL_free(ssl);
    SSL_SESSION_free(probe.session);
    close(fd);
    ERR_clear_error();
}

/* ------------------------------------------------------------------------ */
/* The transport                                                              */
/* ------------------------------------------------------------------------ */

/* A failed SSL call (err from SSL_get_error) as an io_result. Errors leave
 * errno saying why (the connection classifies the cause by it). */
static int failure(struct tls_conn *t, int err)
{
    int saved = errno;
    switch (err) {
    case SSL_ERROR_WANT_READ:
        return IO_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return IO_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: /* closed by the peer: an error to write to */
        saved = EPIPE;
        break;
    case SSL_ERROR_SYSCALL:
        t->failed = true;
        if (saved == 0)
            saved = EIO;
        break;
    default:
        t->failed = true;
        saved = EPROTO;
        break;
    }
    errno = saved;
    return IO_ERROR;
}

static int tls_handshake(struct sock *s)
{
    struct tls_conn *t = s->state;
    if (!t)
        t = s->state = xcalloc(1, sizeof *t);
    if (!t->ssl) {
        t->ssl = new_ssl(s->fd);
        t->failed = false;
        SSL_set_app_data(t->ssl, t);
        if (t->session)
            SSL_set_session(t->ssl, t->session);
    }
    before_call();
    int rc = SSL_connect(t->ssl);
    if (rc == 1)
        return IO_OK;
    int err = SSL_get_error(t->ssl, rc);
    t->why = why_failed(err);
    return failure(t, err);
}

static int tls_failure(struct sock *s)
{
    const struct tls_conn *t = s->state;
    return t ? (int)t->why : TLS_FAIL_OTHER;
}

static bool tls_resumed(struct sock *s)
{
    struct tls_conn *t = s->state;
    return t && t->ssl && SSL_session_reused(t->ssl);
}

static const char *tls_alpn(struct sock *s, size_t *len)
{
    struct tls_conn *t = s->state;
    const unsigned char *chosen = NULL;
    unsigned int n = 0;
    if (t && t->ssl)
        SSL_get0_alpn_selected(t->ssl, &chosen, &n);
    *len = n;
    return n ? (const char *)chosen : NULL;
}

static int clamp(size_t len) { return len > INT_MAX ? INT_MAX : (int)len; }

static ssize_t tls_read(struct sock *s, char *buf, size_t len)
{
    struct tls_conn *t = s->state;
    before_call();
    int n = SSL_read(t->ssl, buf, clamp(len));
    if (n > 0)
        return n;
    int err = SSL_get_error(t->ssl, n);
    /* The end of the stream, with close_notify or without (OpenSSL 1.1.1
     * says SSL_ERROR_SYSCALL with nothing queued and errno still 0). */
    if (err == SSL_ERROR_ZERO_RETURN ||
        (err == SSL_ERROR_SYSCALL && errno == 0 && ERR_peek_error() == 0))
        return 0;
    return failure(t, err);
}

static ssize_t tls_write(struct sock *s, const char *buf, size_t len)
{
    struct tls_conn *t = s->state;
    before_call();
    int n = SSL_write(t->ssl, buf, clamp(len));
    return n > 0 ? n : failure(t, SSL_get_error(t->ssl, n));
}

/* SSL_pending counts the rest of the record being returned; with read-ahead
 * whole records may also wait in OpenSSL's buffer (SSL_has_pending). The
 * socket will not signal either, so the connection must read on. */
static size_t tls_pending(struct sock *s)
{
    struct tls_conn *t = s->state;
    if (!t || !t->ssl)
        return 0;
    int n = SSL_pending(t->ssl);
    return n > 0 ? (size_t)n : (size_t)SSL_has_pending(t->ssl);
}

static void tls_close(struct sock *s)
{
    struct tls_conn *t = s->state;
    if (!t || !t->ssl)
        return;
    /* OpenSSL drops the session of a connection freed without close_notify
     * sent, so a clean close sends one (one non-blocking attempt). After a
     * fatal error it may not be sent, and that session is not resumed. */
    if (!t->failed && SSL_is_init_finished(t->ssl)) {
        before_call();
        SSL_shutdown(t->ssl);
    }
    SSL_free(t->ssl);
    t->ssl = NULL;
    ERR_clear_error();
}

static void tls_release(struct sock *s)
{
    struct tls_conn *t = s->state;
    if (!t)
        return;
    tls_close(s);
    SSL_SESSION_free(t->session);
    free(t);
    s->state = NULL;
}

const struct transport transport_tls = {
    .secure = true,
    .handshake = tls_handshake,
    .resumed = tls_resumed,
    .alpn = tls_alpn,
    .failure = tls_failure,
    .read = tls_read,
    .write = tls_write,
    .pending = tls_pending,
    .close = tls_close,
    .release = tls_release,
};
