/* The QUIC transport: ngtcp2 over a connection's connected UDP socket, with
 * its TLS 1.3 handshake through GnuTLS (ngtcp2's crypto helper) and one set
 * of credentials for the whole run. A connection slot keeps, across
 * reconnects, what the next handshake may use: the newest session ticket
 * (resumption), the server's transport parameters (0-RTT, with --0rtt) and
 * its address-validation token.
 *
 * Datagrams go out in batches: quic_output() packs up to a GSO batch of
 * packets (every one the same size but the last) and the transport's write()
 * sends them with one sendmsg() and UDP_SEGMENT; where the kernel cannot
 * segment, with one sendmmsg(). They come in the same way: read() takes one
 * GRO batch (coalesced datagrams of one size), or where there is no GRO, as
 * many datagrams as recvmmsg() has, and quic_input() feeds each to ngtcp2.
 * The loss-recovery, pacing and idle timers are one ev_timer on the worker's
 * loop, set from ngtcp2_conn_get_expiry() after every batch in or out; when
 * it fires the connection is woken (sock->wake) to write what recovery
 * sends, or to close.
 * SPDX-License-Identifier: MIT */
#include "quic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "net.h"
#include "pool.h"
#include "xalloc.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/* The largest UDP payload volley sends (ngtcp2's default, which fits an
 * Ethernet MTU over IPv6) and accepts (the transport parameter: a little
 * more, for servers that probe a path's MTU on loopback). */
#define QUIC_TX_PAYLOAD 1452
#define QUIC_RX_PAYLOAD 1500
/* A batch of datagrams: the kernel segments at most 64 (UDP_MAX_SEGMENTS),
 * in at most 64 KiB. */
#define QUIC_BATCH_SEGMENTS 64
#define QUIC_BATCH_BYTES (64 * 1024 - 512)
/* Datagrams one recvmmsg() takes where there is no GRO. */
#define QUIC_RX_SLOTS 32
/* The least RTT a handshake assumes before it has measured one: the
 * start-up check's measure, but no less than this, so that a server slow to
 * answer a handshake gets no spurious retransmissions. */
#define QUIC_MIN_INITIAL_RTT (50 * NGTCP2_MILLISECONDS)
/* The flow-control windows volley opens to the server: a response never
 * waits for a window update, and the windows move as the session consumes
 * what arrives. The socket's receive buffer is sized to hold a burst of
 * that order (the kernel caps it at net.core.rmem_max unless volley may
 * force it). */
#define QUIC_STREAM_WINDOW (16u * 1024 * 1024)
#define QUIC_CONN_WINDOW (64u * 1024 * 1024)
#define QUIC_SOCKET_BUFFER (4 * 1024 * 1024)
/* Closed with no word from the server for this long; a request in flight
 * meets --timeout first unless it is longer. */
#define QUIC_IDLE_TIMEOUT (30 * NGTCP2_SECONDS)
/* Unidirectional streams the server may open: its control stream, QPACK's
 * two and some to spare (reserved stream types it may send, RFC 9114 §6.2.3). */
#define QUIC_UNI_STREAMS 16

/* TLS 1.3 only, with the AEADs QUIC uses (RFC 9001 §5.3). */
static const char priority_string[] =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"
    "+AES-128-CCM:%DISABLE_TLS13_COMPAT_MODE";
static const gnutls_datum_t alpn_h3 = {(unsigned char *)"h3", 2};

/* Set up once by quic_setup before the workers start, only read after. */
static struct {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t priority;
    char *sni;         /* the server name to send, or NULL (IP literals get none) */
    char *verify_name; /* with --verify: the name the certificate must carry */
    bool early_data;
    bool ecn;                    /* --ecn: packets marked as ngtcp2 says, marks received read */
    ngtcp2_duration initial_rtt; /* from the start-up check, or 0 */
} run;

/* Whether sendmsg() takes UDP_SEGMENT and the socket UDP_GRO: learnt from the
 * first refusal, for every connection after it. */
static atomic_bool no_gso, no_gro;

/* A record of stream data that came before the session was attached (in
 * the packet that completed the handshake), replayed to it then. */
struct early_rx {
    int64_t id;
    size_t len;
    bool fin;
};

struct quic {
    struct sock *sock;
    /* Kept across reconnects: what the next handshake may use. */
    gnutls_datum_t ticket; /* GnuTLS session data with the newest ticket */
    uint8_t params[256];   /* the server's transport parameters for 0-RTT */
    size_t params_len;
    uint8_t *token; /* NEW_TOKEN, for address validation */
    size_t token_len;
    struct pool pool; /* ngtcp2's memory, reused across packets and reconnects */
    ngtcp2_mem mem;
    /* The current connection. */
    ngtcp2_conn *conn;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    struct sockaddr_storage local, remote;
    ngtcp2_path path;
    ev_timer timer;
    ngtcp2_tstamp armed; /* the expiry the timer is set for, or UINT64_MAX */
    const struct quic_app *app;
    struct buf stash;   /* stream data before the session: early_rx records */
    ngtcp2_ccerr ccerr; /* what volley's CONNECTION_CLOSE says */
    bool over;          /* no more packets may be sent (closing, draining) */
    bool closed_by_peer;
    bool stateless_reset;
    bool version_negotiation;
    bool early;        /* 0-RTT was attempted */
    bool completed;    /* the handshake completed */
    bool gro;          /* the socket coalesces datagrams */
    uint8_t rx_ecn;    /* --ecn: the ECN marks of the last read's datagrams */
    uint8_t tx_ecn;    /* --ecn: the marks of the batch to send */
    uint8_t carry_ecn; /* --ecn: those of the packet kept for the next batch */
    int tos;           /* --ecn: the marks the socket sends with, -1 unset */
    enum cause cause;  /* why it is over */
    /* The datagrams of the last read: each rx_seg bytes long but the last
     * (GRO), or rx_lens[i] each (recvmmsg). */
    size_t rx_seg, rx_n;
    uint16_t rx_lens[QUIC_RX_SLOTS];
    /* The batch to send: tx_end bytes in datagrams of tx_seg bytes but the
     * last, tx_off of them written; past tx_end (to tx.len), a packet larger
     * than those, which starts the next batch. */
    struct buf tx;
    size_t tx_off, tx_end, tx_seg;
};

static uint64_t now_ns(void) { return clock_us() * 1000; }

static bool is_ip_literal(const char *host)
{
    unsigned char addr[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

struct quic *quic_of(struct sock *s) { return s->state; }

/* ------------------------------------------------------------------------ */
/* The run's credentials                                                      */
/* ------------------------------------------------------------------------ */

static void check_readable(const char *option, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("%s %s: %s", option, path, strerror(errno));
    fclose(f);
}

void quic_setup(const struct quic_options *o)
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
    run.ecn = o->ecn;
}

void quic_cleanup(void)
{
    if (run.cred)
        gnutls_certificate_free_credentials(run.cred);
    if (run.priority)
        gnutls_priority_deinit(run.priority);
    free(run.sni);
    free(run.verify_name);
    memset(&run, 0, sizeof run);
}

/* ------------------------------------------------------------------------ */
/* Why a connection ended                                                     */
/* ------------------------------------------------------------------------ */

/* The worker's stats, where QUIC's own figures go (none in the start-up
 * check). */
static struct stats *figures(struct quic *q) { return q->sock->stats; }

static void end(struct quic *q, enum cause cause)
{
    if (!q->over) {
        q->over = true;
        q->cause = cause;
    }
}

/* A TLS alert ended the handshake: one the server sent (in CONNECTION_CLOSE,
 * as a CRYPTO_ERROR) or one GnuTLS raised here (a certificate that does not
 * verify). */
static void count_alert(struct quic *q, unsigned alert)
{
    struct stats *st = figures(q);
    if (st)
        st->h3_alerts[alert & 0xff]++;
}

/* The peer's CONNECTION_CLOSE: by its code, transport or application. */
static void peer_closed(struct quic *q)
{
    const ngtcp2_ccerr *e = ngtcp2_conn_get_ccerr(q->conn);
    struct stats *st = figures(q);
    q->closed_by_peer = true;
    if (e->type == NGTCP2_CCERR_TYPE_TRANSPORT && e->error_code >= NGTCP2_CRYPTO_ERROR &&
        e->error_code <= NGTCP2_CRYPTO_ERROR + 0xff) {
        count_alert(q, (unsigned)(e->error_code - NGTCP2_CRYPTO_ERROR));
        end(q, q->completed ? CAUSE_QUIC_CLOSE : CAUSE_TLS_HANDSHAKE);
        return;
    }
    if (e->type == NGTCP2_CCERR_TYPE_TRANSPORT && st) {
        uint64_t c = e->error_code;
        st->h3_close_transport[c < STATS_QUIC_CODES - 1 ? c : STATS_QUIC_CODES - 1]++;
    } else if (st) {
        uint64_t c = e->error_code - 0x100;
        st->h3_close_application[e->error_code >= 0x100 && c < STATS_H3_CODES - 1
                                     ? c
                                     : STATS_H3_CODES - 1]++;
    }
    /* A close without an error ends the connection normally: what was in
     * flight on it is counted by the session. */
    bool clean =
        (e->type == NGTCP2_CCERR_TYPE_TRANSPORT && e->error_code == NGTCP2_NO_ERROR) ||
        (e->type == NGTCP2_CCERR_TYPE_APPLICATION && q->app && e->error_code == q->app->no_error);
    end(q, clean ? CAUSE_CLOSED : CAUSE_QUIC_CLOSE);
}

/* ngtcp2 said the connection is over (rv from reading, writing or the
 * timer). */
static void failed(struct quic *q, int rv)
{
    struct stats *st = figures(q);
    switch (rv) {
    case NGTCP2_ERR_DRAINING:
        if (q->stateless_reset) {
            if (st)
                st->h3_stateless_resets++;
            end(q, CAUSE_QUIC_STATELESS_RESET);
        } else {
            peer_closed(q);
        }
        break;
    case NGTCP2_ERR_CLOSING:
        end(q, CAUSE_CLOSED);
        break;
    case NGTCP2_ERR_RECV_VERSION_NEGOTIATION:
    case NGTCP2_ERR_VERSION_NEGOTIATION:
    case NGTCP2_ERR_VERSION_NEGOTIATION_FAILURE:
        if (st)
            st->h3_version_negotiations++;
        end(q, CAUSE_QUIC_VERSION);
        break;
    case NGTCP2_ERR_IDLE_CLOSE:
        if (st)
            st->h3_idle_timeouts++;
        end(q, CAUSE_QUIC_IDLE_TIMEOUT);
        break;
    case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
        end(q, CAUSE_CONNECT_TIMEOUT);
        break;
    case NGTCP2_ERR_CRYPTO:
        count_alert(q, ngtcp2_conn_get_tls_alert(q->conn));
        ngtcp2_ccerr_set_tls_alert(&q->ccerr, ngtcp2_conn_get_tls_alert(q->conn), NULL, 0);
        end(q, CAUSE_TLS_HANDSHAKE);
        break;
    case NGTCP2_ERR_CALLBACK_FAILURE:
        /* The session failed the connection: it keeps the cause and set
         * the code CONNECTION_CLOSE carries (quic_fail). */
        end(q, CAUSE_H3_PROTOCOL);
        break;
    default:
        if (q->ccerr.error_code == NGTCP2_NO_ERROR && q->ccerr.type == NGTCP2_CCERR_TYPE_TRANSPORT)
            ngtcp2_ccerr_set_liberr(&q->ccerr, rv, NULL, 0);
        end(q, q->completed ? CAUSE_QUIC_PROTOCOL : CAUSE_TLS_HANDSHAKE);
        break;
    }
}

enum cause quic_cause(struct quic *q) { return q->over ? q->cause : CAUSE_CLOSED; }

bool quic_over(struct quic *q) { return q->over; }

void quic_fail(struct quic *q, uint64_t code)
{
    ngtcp2_ccerr_set_application_error(&q->ccerr, code, NULL, 0);
}

bool quic_early(struct quic *q) { return q->early; }

/* ------------------------------------------------------------------------ */
/* ngtcp2's callbacks (user_data is the struct quic)                         */
/* ------------------------------------------------------------------------ */

static void stash(struct quic *q, int64_t id, const uint8_t *data, size_t len, bool fin)
{
    struct early_rx r = {.id = id, .len = len, .fin = fin};
    buf_append(&q->stash, &r, sizeof r);
    buf_append(&q->stash, data, len);
}

static int on_recv_stream_data(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t offset,
                               const uint8_t *data, size_t len, void *user_data, void *sd)
{
    (void)conn, (void)offset, (void)sd;
    struct quic *q = user_data;
    bool fin = flags & NGTCP2_STREAM_DATA_FLAG_FIN;
    if (!q->app) {
        stash(q, id, data, len, fin);
        return 0;
    }
    return q->app->recv(q->app->arg, id, data, len, fin) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_acked(ngtcp2_conn *conn, int64_t id, uint64_t offset, uint64_t len, void *user_data,
                    void *sd)
{
    (void)conn, (void)offset, (void)sd;
    struct quic *q = user_data;
    if (!q->app)
        return 0;
    return q->app->acked(q->app->arg, id, len) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_stream_close(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t code,
                           void *user_data, void *sd)
{
    (void)sd;
    struct quic *q = user_data;
    struct stats *st = figures(q);
    if (st && ngtcp2_is_bidi_stream(id))
        st->h3_lost += ngtcp2_conn_get_stream_loss_count(conn, id);
    if (!q->app)
        return 0;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        code = q->app->no_error;
    return q->app->closed(q->app->arg, id, code) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_stream_reset(ngtcp2_conn *conn, int64_t id, uint64_t final_size, uint64_t code,
                           void *user_data, void *sd)
{
    (void)conn, (void)final_size, (void)sd;
    struct quic *q = user_data;
    if (!q->app)
        return 0;
    return q->app->reset(q->app->arg, id, code) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_stop_sending(ngtcp2_conn *conn, int64_t id, uint64_t code, void *user_data, void *sd)
{
    return on_stream_reset(conn, id, 0, code, user_data, sd);
}

static int on_streams(ngtcp2_conn *conn, uint64_t max_streams, void *user_data)
{
    (void)conn, (void)max_streams;
    struct quic *q = user_data;
    if (!q->app)
        return 0;
    return q->app->streams(q->app->arg) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_window(ngtcp2_conn *conn, int64_t id, uint64_t max_data, void *user_data, void *sd)
{
    (void)conn, (void)max_data, (void)sd;
    struct quic *q = user_data;
    if (!q->app)
        return 0;
    return q->app->unblocked(q->app->arg, id) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_stateless_reset(ngtcp2_conn *conn, const ngtcp2_pkt_stateless_reset *sr,
                              void *user_data)
{
    (void)conn, (void)sr;
    struct quic *q = user_data;
    q->stateless_reset = true;
    return 0;
}

static int on_version_negotiation(ngtcp2_conn *conn, const ngtcp2_pkt_hd *hd, const uint32_t *sv,
                                  size_t nsv, void *user_data)
{
    (void)conn, (void)hd, (void)sv, (void)nsv;
    struct quic *q = user_data;
    q->version_negotiation = true;
    return 0;
}

static int on_new_token(ngtcp2_conn *conn, const uint8_t *token, size_t len, void *user_data)
{
    (void)conn;
    struct quic *q = user_data;
    q->token = xrealloc(q->token, len ? len : 1);
    memcpy(q->token, token, len);
    q->token_len = len;
    return 0;
}

/* The handshake is done: keep the server's transport parameters for the
 * next connection's 0-RTT, and see whether this one's early data was taken
 * (GnuTLS says so only now; ngtcp2 then discards the streams it carried). */
static int on_handshake_completed(ngtcp2_conn *conn, void *user_data)
{
    struct quic *q = user_data;
    struct stats *st = figures(q);
    q->completed = true;
    ngtcp2_ssize n = ngtcp2_conn_encode_0rtt_transport_params(conn, q->params, sizeof q->params);
    q->params_len = n > 0 ? (size_t)n : 0;
    if (!q->early)
        return 0;
    if (gnutls_session_get_flags(q->tls) & GNUTLS_SFLAGS_EARLY_DATA) {
        if (st)
            st->h3_early_accepted++;
        return 0;
    }
    if (st)
        st->h3_early_rejected++;
    return ngtcp2_conn_tls_early_data_rejected(conn) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_early_rejected(ngtcp2_conn *conn, void *user_data)
{
    (void)conn;
    struct quic *q = user_data;
    if (!q->app)
        return 0;
    return q->app->early_rejected(q->app->arg) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static void on_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, dest, len) != 0)
        die("HTTP/3: no random numbers from GnuTLS");
}

static int on_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t len,
                      void *user_data)
{
    (void)conn, (void)user_data;
    on_rand(cid->data, len, NULL);
    cid->datalen = len;
    on_rand(token, NGTCP2_STATELESS_RESET_TOKENLEN, NULL);
    return 0;
}

static ngtcp2_conn *conn_of_ref(ngtcp2_crypto_conn_ref *ref)
{
    struct quic *q = ref->user_data;
    return q->conn;
}

/* TLS 1.3 sends tickets after the handshake, whenever the server likes: the
 * slot keeps the newest, to resume (and with --0rtt, send early data). */
static int on_ticket(gnutls_session_t tls, unsigned htype, unsigned when, unsigned incoming,
                     const gnutls_datum_t *msg)
{
    (void)htype, (void)when, (void)incoming, (void)msg;
    ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(tls);
    struct quic *q = ref->user_data;
    gnutls_datum_t data;
    if (gnutls_session_get_data2(tls, &data) != 0)
        return 0;
    gnutls_free(q->ticket.data);
    q->ticket = data;
    return 0;
}

static const ngtcp2_callbacks callbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = on_handshake_completed,
    .recv_version_negotiation = on_version_negotiation,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = on_recv_stream_data,
    .acked_stream_data_offset = on_acked,
    .stream_close = on_stream_close,
    .recv_stateless_reset = on_stateless_reset,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .extend_max_local_streams_bidi = on_streams,
    .rand = on_rand,
    .get_new_connection_id = on_new_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = on_stream_reset,
    .extend_max_stream_data = on_window,
    .recv_new_token = on_new_token,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = on_stop_sending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    .tls_early_data_rejected = on_early_rejected,
};

/* ------------------------------------------------------------------------ */
/* Starting a connection                                                      */
/* ------------------------------------------------------------------------ */

/* A receive buffer for the windows: forced past net.core.rmem_max where
 * volley may (CAP_NET_ADMIN), else as large as the limit allows. */
static void size_buffers(int fd)
{
    int n = QUIC_SOCKET_BUFFER;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &n, sizeof n) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof n);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &n, sizeof n) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof n);
}

static void set_socket_options(struct quic *q, int fd)
{
    int one = 1;
    size_buffers(fd);
    q->gro = !atomic_load(&no_gro) && setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) == 0;
    if (!q->gro)
        atomic_store(&no_gro, true);
    /* QUIC needs the Don't Fragment bit (RFC 9000 §14): a datagram too large
     * for the path is lost, not cut into fragments. ECN stays off unless
     * asked for (--ecn): then the marks of what comes in are read, for
     * ngtcp2's ECN validation and the figures. */
    int pmtu = IP_PMTUDISC_DO;
    bool v6 = q->remote.ss_family == AF_INET6;
    if (v6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu);
    else
        setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    q->tos = -1;
    if (run.ecn)
        setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_RECVTCLASS : IP_RECVTOS, &one,
                   sizeof one);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents);

/* The slot's state, made on its first connection. */
static struct quic *state_of(struct sock *s)
{
    struct quic *q = s->state;
    if (!q) {
        q = s->state = xcalloc(1, sizeof *q);
        ev_init(&q->timer, on_timer);
        q->timer.data = q;
        q->armed = UINT64_MAX;
        q->mem = (ngtcp2_mem){&q->pool, pool_mem_malloc, pool_mem_free, pool_mem_calloc,
                              pool_mem_realloc};
    }
    q->sock = s;
    return q;
}

static bool new_tls(struct quic *q)
{
    /* Early data only with --0rtt: GnuTLS would otherwise offer it on every
     * resumption, and servers would take 0-RTT that never comes. */
    unsigned flags = GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA | GNUTLS_NONBLOCK;
    if (gnutls_init(&q->tls, flags | (run.early_data ? GNUTLS_ENABLE_EARLY_DATA : 0)) != 0)
        return false;
    if (ngtcp2_crypto_gnutls_configure_client_session(q->tls) != 0 ||
        gnutls_priority_set(q->tls, run.priority) != 0 ||
        gnutls_credentials_set(q->tls, GNUTLS_CRD_CERTIFICATE, run.cred) != 0 ||
        gnutls_alpn_set_protocols(q->tls, &alpn_h3, 1, GNUTLS_ALPN_MANDATORY) != 0)
        return false;
    if (run.sni && gnutls_server_name_set(q->tls, GNUTLS_NAME_DNS, run.sni, strlen(run.sni)) != 0)
        return false;
    if (run.verify_name)
        gnutls_session_set_verify_cert(q->tls, run.verify_name, 0);
    q->ref.get_conn = conn_of_ref;
    q->ref.user_data = q;
    gnutls_session_set_ptr(q->tls, &q->ref);
    gnutls_handshake_set_hook_function(q->tls, GNUTLS_HANDSHAKE_NEW_SESSION_TICKET,
                                       GNUTLS_HOOK_POST, on_ticket);
    /* A ticket the server no longer takes only costs a full handshake. */
    if (q->ticket.size)
        gnutls_session_set_data(q->tls, q->ticket.data, q->ticket.size);
    return true;
}

static void new_settings(struct quic *q, ngtcp2_settings *settings, ngtcp2_transport_params *params)
{
    ngtcp2_settings_default(settings);
    settings->initial_ts = now_ns();
    /* A lost Initial is sent again after three RTTs (RFC 9002 §6.2): from
     * the RTT the start-up check measured, not the default 333 ms. */
    if (run.initial_rtt)
        settings->initial_rtt = run.initial_rtt;
    settings->max_tx_udp_payload_size = QUIC_TX_PAYLOAD;
    /* Every packet of a batch must have the size of its first (GSO):
     * probes for a larger MTU would break that. */
    settings->no_pmtud = 1;
    if (q->token_len) {
        settings->token = q->token;
        settings->tokenlen = q->token_len;
    }
    ngtcp2_transport_params_default(params);
    params->initial_max_stream_data_bidi_local = QUIC_STREAM_WINDOW;
    params->initial_max_stream_data_uni = QUIC_STREAM_WINDOW;
    params->initial_max_data = QUIC_CONN_WINDOW;
    params->initial_max_streams_bidi = 0;
    params->initial_max_streams_uni = QUIC_UNI_STREAMS;
    params->max_idle_timeout = QUIC_IDLE_TIMEOUT;
    params->max_udp_payload_size = QUIC_RX_PAYLOAD;
}

static bool start(struct quic *q)
{
    struct sock *s = q->sock;
    socklen_t local_len = sizeof q->local, remote_len = sizeof q->remote;
    if (getsockname(s->fd, (struct sockaddr *)&q->local, &local_len) != 0 ||
        getpeername(s->fd, (struct sockaddr *)&q->remote, &remote_len) != 0) {
        end(q, CAUSE_CONNECT_OTHER);
        return false;
    }
    set_socket_options(q, s->fd);
    q->path = (ngtcp2_path){
        .local = {.addr = (struct sockaddr *)&q->local, .addrlen = local_len},
        .remote = {.addr = (struct sockaddr *)&q->remote, .addrlen = remote_len},
    };
    ngtcp2_settings settings;
    ngtcp2_transport_params params;
    new_settings(q, &settings, &params);
    ngtcp2_cid dcid = {.datalen = 18}, scid = {.datalen = 16};
    on_rand(dcid.data, dcid.datalen, NULL);
    on_rand(scid.data, scid.datalen, NULL);
    if (!new_tls(q) || ngtcp2_conn_client_new(&q->conn, &dcid, &scid, &q->path, NGTCP2_PROTO_VER_V1,
                                              &callbacks, &settings, &params, &q->mem, q) != 0)
        die("HTTP/3: out of memory");
    ngtcp2_conn_set_tls_native_handle(q->conn, q->tls);
    ngtcp2_ccerr_default(&q->ccerr);
    q->over = q->closed_by_peer = q->stateless_reset = q->version_negotiation = false;
    q->completed = q->early = false;
    q->app = NULL;
    q->rx_n = q->rx_seg = 0;
    q->tx.len = q->tx_off = q->tx_end = q->tx_seg = 0;
    buf_clear(&q->stash);
    /* --0rtt: with a ticket and the server's parameters, requests go out
     * in the first flight; the session opens at once. */
    if (run.early_data && q->ticket.size && q->params_len &&
        ngtcp2_conn_decode_and_set_0rtt_transport_params(q->conn, q->params, q->params_len) == 0) {
        q->early = true;
        struct stats *st = figures(q);
        if (st)
            st->h3_early_attempts++;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* The timer                                                                  */
/* ------------------------------------------------------------------------ */

/* Set the timer to ngtcp2's next expiry (loss detection, probe, ACK delay,
 * pacing, idle timeout). */
static void arm(struct quic *q)
{
    struct ev_loop *loop = q->sock->loop;
    if (!loop || !q->conn)
        return;
    ngtcp2_tstamp expiry = q->over ? UINT64_MAX : ngtcp2_conn_get_expiry(q->conn);
    if (expiry == q->armed)
        return;
    q->armed = expiry;
    ev_timer_stop(loop, &q->timer);
    if (expiry == UINT64_MAX)
        return;
    ngtcp2_tstamp now = now_ns();
    ev_timer_set(&q->timer, expiry > now ? (double)(expiry - now) / 1e9 : 0., 0.);
    ev_timer_start(loop, &q->timer);
}

/* What the timer is for: false when it ended the connection. */
static bool expire(struct quic *q)
{
    int rv = ngtcp2_conn_handle_expiry(q->conn, now_ns());
    if (rv != 0)
        failed(q, rv);
    return !q->over;
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct quic *q = t->data;
    q->armed = UINT64_MAX;
    if (!q->conn)
        return;
    expire(q);
    /* The connection writes what recovery sends (its write path calls
     * quic_output), or closes when it is over. */
    q->sock->wake(q->sock);
    arm(q);
}

/* ------------------------------------------------------------------------ */
/* Datagrams in                                                               */
/* ------------------------------------------------------------------------ */

static int read_error(struct quic *q, int err)
{
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
        return IO_WANT_READ;
    /* ICMP port unreachable on the connected socket: nothing listens. */
    end(q, err == ECONNREFUSED ? CAUSE_REFUSED : CAUSE_READ_OTHER);
    errno = err;
    return IO_ERROR;
}

/* --ecn: the marks of a datagram, from IP_TOS or IPV6_TCLASS. A GRO batch
 * holds only datagrams of the same marks. */
static void read_tos(struct quic *q, const struct cmsghdr *c)
{
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1)) {
        q->rx_ecn = *(const uint8_t *)CMSG_DATA(c) & NGTCP2_ECN_MASK;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS &&
               c->cmsg_len >= CMSG_LEN(sizeof(int))) {
        int tclass;
        memcpy(&tclass, CMSG_DATA(c), sizeof tclass);
        q->rx_ecn = (uint8_t)(tclass & NGTCP2_ECN_MASK);
    }
}

/* One GRO batch: datagrams of one size (the last maybe shorter), their
 * size in the control message. */
static ssize_t read_gro(struct quic *q, char *buf, size_t len)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int)) * 2];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    ssize_t n = recvmsg(q->sock->fd, &msg, MSG_DONTWAIT);
    if (n < 0)
        return read_error(q, errno);
    q->rx_seg = (size_t)n;
    q->rx_ecn = NGTCP2_ECN_NOT_ECT;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
            int seg;
            memcpy(&seg, CMSG_DATA(c), sizeof seg);
            if (seg > 0)
                q->rx_seg = (size_t)seg;
        } else {
            read_tos(q, c);
        }
    }
    q->rx_n = 0;
    return n;
}

/* As many datagrams as recvmmsg() has, packed one after the other. */
static ssize_t read_mmsg(struct quic *q, char *buf, size_t len)
{
    struct mmsghdr msgs[QUIC_RX_SLOTS];
    struct iovec iov[QUIC_RX_SLOTS];
    size_t slots = len / QUIC_RX_PAYLOAD;
    if (slots > QUIC_RX_SLOTS)
        slots = QUIC_RX_SLOTS;
    if (slots == 0)
        slots = 1;
    size_t slot = len / slots;
    memset(msgs, 0, sizeof msgs[0] * slots);
    for (size_t i = 0; i < slots; i++) {
        iov[i] = (struct iovec){.iov_base = buf + i * slot, .iov_len = slot};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int got = recvmmsg(q->sock->fd, msgs, (unsigned)slots, MSG_DONTWAIT, NULL);
    if (got < 0)
        return read_error(q, errno);
    size_t n = 0;
    for (int i = 0; i < got; i++) {
        size_t k = msgs[i].msg_len;
        memmove(buf + n, buf + (size_t)i * slot, k);
        q->rx_lens[i] = (uint16_t)k;
        n += k;
    }
    q->rx_n = (size_t)got;
    q->rx_seg = 0;
    q->rx_ecn = NGTCP2_ECN_NOT_ECT; /* --ecn reads the marks of GRO batches only */
    return (ssize_t)n;
}

static ssize_t quic_read(struct sock *s, char *buf, size_t len)
{
    struct quic *q = s->state;
    if (q->over)
        return IO_ERROR;
    return q->gro ? read_gro(q, buf, len) : read_mmsg(q, buf, len);
}

static bool feed(struct quic *q, const char *data, size_t len, ngtcp2_tstamp ts)
{
    struct stats *st = figures(q);
    if (st)
        st->h3_packets_received++;
    /* Fewer than 21 bytes are never a QUIC packet (RFC 9000 §10.3). */
    if (len < 21)
        return true;
    ngtcp2_pkt_info pi = {.ecn = q->rx_ecn};
    if (st && run.ecn)
        st->h3_ecn[q->rx_ecn]++;
    int rv = ngtcp2_conn_read_pkt(q->conn, &q->path, &pi, (const uint8_t *)data, len, ts);
    if (rv != 0) {
        failed(q, rv);
        return false;
    }
    return true;
}

bool quic_input(struct quic *q, const char *buf, size_t len)
{
    if (q->over)
        return false;
    ngtcp2_tstamp ts = now_ns();
    if (q->rx_n) {
        for (size_t i = 0, off = 0; i < q->rx_n && off < len; off += q->rx_lens[i++])
            if (!feed(q, buf + off, q->rx_lens[i], ts))
                break;
    } else {
        size_t seg = q->rx_seg ? q->rx_seg : len;
        for (size_t off = 0; off < len; off += seg)
            if (!feed(q, buf + off, len - off < seg ? len - off : seg, ts))
                break;
    }
    arm(q);
    return !q->over;
}

/* ------------------------------------------------------------------------ */
/* Datagrams out                                                              */
/* ------------------------------------------------------------------------ */

/* One packet, written into dest (at most len bytes), with what stream data
 * the session has; its size, 0 when nothing is to be sent, < 0 on a
 * fatal error. */
static ngtcp2_ssize pack(struct quic *q, uint8_t *dest, size_t len, ngtcp2_pkt_info *pi,
                         ngtcp2_tstamp ts)
{
    for (;;) {
        int64_t id = -1;
        int fin = 0;
        ngtcp2_vec v[16];
        long nv = 0;
        if (q->app && ngtcp2_conn_get_max_data_left(q->conn)) {
            nv = q->app->pull(q->app->arg, &id, &fin, v, sizeof v / sizeof v[0]);
            if (nv < 0)
                return NGTCP2_ERR_CALLBACK_FAILURE;
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize taken = -1;
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(q->conn, NULL, pi, dest, len, &taken, flags, id,
                                                   v, (size_t)nv, ts);
        if (taken >= 0 && q->app && q->app->pushed(q->app->arg, id, (size_t)taken))
            return NGTCP2_ERR_CALLBACK_FAILURE;
        switch (n) {
        case NGTCP2_ERR_WRITE_MORE: /* room left in the packet for more streams */
            continue;
        case NGTCP2_ERR_STREAM_DATA_BLOCKED:
            q->app->blocked(q->app->arg, id);
            continue;
        case NGTCP2_ERR_STREAM_SHUT_WR:
            q->app->shut(q->app->arg, id);
            continue;
        default:
            return n;
        }
    }
}

/* Pack the next batch into q->tx: packets of one size but the last, as
 * many as the congestion controller's send quantum and one GSO batch
 * allow. A packet larger than the first cannot join the batch: it is kept
 * to start the next one. */
static void fill(struct quic *q)
{
    ngtcp2_tstamp ts = now_ns();
    struct stats *st = figures(q);
    size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(q->conn);
    size_t limit = ngtcp2_conn_get_send_quantum(q->conn);
    if (limit > QUIC_BATCH_BYTES)
        limit = QUIC_BATCH_BYTES;
    size_t len = q->tx.len - q->tx_end, seg = len, count = len ? 1 : 0;
    if (len) {
        memmove(q->tx.data, q->tx.data + q->tx_end, len);
        q->tx_ecn = q->carry_ecn;
    }
    q->tx.len = q->tx_end = len;
    buf_reserve(&q->tx, limit + max);
    while (count < QUIC_BATCH_SEGMENTS && (count == 0 || len + seg <= limit) &&
           (count == 0 || len == count * seg)) {
        ngtcp2_pkt_info pi = {0};
        ngtcp2_ssize n = pack(q, (uint8_t *)q->tx.data + len, max, &pi, ts);
        if (n < 0)
            failed(q, (int)n);
        if (n <= 0)
            break;
        if (st)
            st->h3_packets_sent++;
        /* With --ecn every packet of a batch carries the same marks. */
        uint8_t ecn = run.ecn ? pi.ecn : NGTCP2_ECN_NOT_ECT;
        if (count && ((size_t)n > seg || ecn != q->tx_ecn)) {
            q->tx.len = len + (size_t)n; /* the next batch's first */
            q->carry_ecn = ecn;
            break;
        }
        if (count++ == 0) {
            seg = (size_t)n;
            q->tx_ecn = ecn;
        }
        len += (size_t)n;
        q->tx.len = len;
    }
    q->tx_end = len;
    q->tx_seg = seg;
    q->tx_off = 0;
    if (len)
        ngtcp2_conn_update_pkt_tx_time(q->conn, ts);
}

size_t quic_output(struct quic *q, const char **data)
{
    if (q->tx_off == q->tx_end) {
        if (!q->conn || q->over)
            return 0;
        fill(q);
        arm(q);
    }
    *data = q->tx.data + q->tx_off;
    return q->tx_end - q->tx_off;
}

void quic_wrote(struct quic *q, size_t n) { q->tx_off += n; }

static ssize_t write_error(struct quic *q, int err)
{
    if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS || err == EINTR)
        return IO_WANT_WRITE;
    end(q, err == ECONNREFUSED ? CAUSE_REFUSED : CAUSE_WRITE_OTHER);
    errno = err;
    return IO_ERROR;
}

/* The datagrams of len bytes at data (seg bytes each but the last) with
 * sendmmsg(); how many bytes went. */
static ssize_t send_mmsg(struct quic *q, const char *data, size_t len, size_t seg)
{
    struct mmsghdr msgs[QUIC_BATCH_SEGMENTS];
    struct iovec iov[QUIC_BATCH_SEGMENTS];
    unsigned k = 0;
    for (size_t off = 0; off < len && k < QUIC_BATCH_SEGMENTS; off += seg, k++) {
        iov[k] = (struct iovec){.iov_base = (char *)data + off,
                                .iov_len = len - off < seg ? len - off : seg};
        msgs[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[k], .msg_iovlen = 1}};
    }
    int sent = sendmmsg(q->sock->fd, msgs, k, MSG_DONTWAIT);
    if (sent <= 0)
        return write_error(q, sent < 0 ? errno : EAGAIN);
    size_t n = 0;
    for (int i = 0; i < sent; i++)
        n += iov[i].iov_len;
    return (ssize_t)n;
}

/* The same with one sendmsg() the kernel segments (UDP_SEGMENT). */
static ssize_t send_gso(struct quic *q, const char *data, size_t len, size_t seg)
{
    struct iovec iov = {.iov_base = (char *)data, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (len > seg) {
        memset(&control, 0, sizeof control);
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t size = (uint16_t)seg;
        memcpy(CMSG_DATA(c), &size, sizeof size);
    }
    ssize_t n = sendmsg(q->sock->fd, &msg, MSG_DONTWAIT);
    if (n >= 0)
        return (ssize_t)len;
    /* A kernel or device without UDP segmentation: sendmmsg from now on. */
    if (len > seg && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)) {
        atomic_store(&no_gso, true);
        return send_mmsg(q, data, len, seg);
    }
    return write_error(q, errno);
}

/* --ecn: the socket sends with the batch's marks (one system call when
 * they change: ngtcp2 marks every packet alike once the path is validated). */
static void mark(struct quic *q)
{
    if (!run.ecn || q->tos == q->tx_ecn)
        return;
    int tos = q->tx_ecn;
    if (q->remote.ss_family == AF_INET6)
        setsockopt(q->sock->fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
    else
        setsockopt(q->sock->fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    q->tos = tos;
}

static ssize_t quic_write(struct sock *s, const char *buf, size_t len)
{
    struct quic *q = s->state;
    mark(q);
    /* What is left of the batch starts on a datagram's boundary. */
    size_t seg = q->tx_seg ? q->tx_seg : len;
    return atomic_load(&no_gso) ? send_mmsg(q, buf, len, seg) : send_gso(q, buf, len, seg);
}

/* Everything ngtcp2 has to send now, written by the transport itself
 * (during the handshake, before there is a session). */
static int flush(struct quic *q)
{
    const char *data;
    size_t len;
    while ((len = quic_output(q, &data)) > 0) {
        ssize_t n = quic_write(q->sock, data, len);
        if (n < 0)
            return (int)n;
        quic_wrote(q, (size_t)n);
    }
    return q->over ? IO_ERROR : IO_OK;
}

/* ------------------------------------------------------------------------ */
/* The transport                                                              */
/* ------------------------------------------------------------------------ */

/* Thread-local: what handshakes read before there is a session (the
 * worker's receive buffer is the connection's). */
static __thread char handshake_buf[64 * 1024];

static int quic_handshake(struct sock *s)
{
    struct quic *q = state_of(s);
    if (!q->conn && !start(q))
        return IO_ERROR;
    for (;;) {
        ssize_t n = quic_read(s, handshake_buf, sizeof handshake_buf);
        if (n == IO_WANT_READ)
            break;
        if (n < 0 || !quic_input(q, handshake_buf, (size_t)n))
            return IO_ERROR;
        if (q->completed)
            break; /* what comes next is the session's */
    }
    int rv = flush(q);
    arm(q);
    if (rv != IO_OK)
        return rv;
    return q->completed || q->early ? IO_OK : IO_WANT_READ;
}

static bool quic_resumed(struct sock *s)
{
    struct quic *q = s->state;
    return q && q->tls && gnutls_session_is_resumed(q->tls);
}

/* ALPN h3, the one protocol offered (GNUTLS_ALPN_MANDATORY): a handshake
 * completes only with it, and 0-RTT resumes a session that had it. */
static const char *quic_alpn(struct sock *s, size_t *len)
{
    (void)s;
    *len = 2;
    return "h3";
}

static size_t quic_pending(struct sock *s)
{
    (void)s;
    return 0;
}

/* The end of the connection's figures: its RTT and congestion window. */
static void count_end(struct quic *q)
{
    struct stats *st = figures(q);
    if (!st || !q->completed)
        return;
    ngtcp2_conn_info info;
    ngtcp2_conn_get_conn_info(q->conn, &info);
    uint64_t rtt = info.smoothed_rtt / 1000, min = info.min_rtt / 1000;
    st->h3_ended++;
    st->h3_rtt_us += rtt;
    st->h3_cwnd += info.cwnd;
    if (info.min_rtt != UINT64_MAX && min < st->h3_min_rtt_us)
        st->h3_min_rtt_us = min;
}

/* A connection that can still talk says goodbye with CONNECTION_CLOSE (no
 * error, unless the session found one), so the server frees it at once. */
static void say_goodbye(struct quic *q)
{
    if (q->over || ngtcp2_conn_in_closing_period(q->conn) ||
        ngtcp2_conn_in_draining_period(q->conn))
        return;
    if (q->app && q->ccerr.type == NGTCP2_CCERR_TYPE_TRANSPORT &&
        q->ccerr.error_code == NGTCP2_NO_ERROR)
        ngtcp2_ccerr_set_application_error(&q->ccerr, q->app->no_error, NULL, 0);
    uint8_t buf[QUIC_TX_PAYLOAD];
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(q->conn, NULL, NULL, buf, sizeof buf,
                                                        &q->ccerr, now_ns());
    if (n > 0)
        (void)send(q->sock->fd, buf, (size_t)n, MSG_DONTWAIT);
}

static void quic_close(struct sock *s)
{
    struct quic *q = s->state;
    if (!q || !q->conn)
        return;
    if (s->loop)
        ev_timer_stop(s->loop, &q->timer);
    q->armed = UINT64_MAX;
    say_goodbye(q);
    count_end(q);
    ngtcp2_conn_del(q->conn);
    gnutls_deinit(q->tls);
    q->conn = NULL;
    q->tls = NULL;
    q->app = NULL;
    buf_reset(&q->tx, 0);
    q->tx_off = q->tx_end = 0;
    buf_reset(&q->stash, 0);
}

static void quic_release(struct sock *s)
{
    struct quic *q = s->state;
    if (!q)
        return;
    quic_close(s);
    gnutls_free(q->ticket.data);
    free(q->token);
    buf_free(&q->tx);
    buf_free(&q->stash);
    pool_clear(&q->pool);
    free(q);
    s->state = NULL;
}

static enum cause quic_failure(struct sock *s)
{
    struct quic *q = s->state;
    return q ? quic_cause(q) : CAUSE_CONNECT_OTHER;
}

const struct transport transport_quic = {
    .secure = true,
    .datagram = true,
    .handshake = quic_handshake,
    .resumed = quic_resumed,
    .alpn = quic_alpn,
    .read = quic_read,
    .write = quic_write,
    .pending = quic_pending,
    .close = quic_close,
    .release = quic_release,
    .cause = quic_failure,
};

/* ------------------------------------------------------------------------ */
/* For the session                                                            */
/* ------------------------------------------------------------------------ */

void quic_attach(struct quic *q, const struct quic_app *app)
{
    q->app = app;
    /* Stream data that came with the end of the handshake. */
    size_t off = 0;
    while (off < q->stash.len && !q->over) {
        struct early_rx r;
        memcpy(&r, q->stash.data + off, sizeof r);
        off += sizeof r;
        if (app->recv(app->arg, r.id, (const uint8_t *)q->stash.data + off, r.len, r.fin))
            end(q, CAUSE_H3_PROTOCOL);
        off += r.len;
    }
    buf_reset(&q->stash, 0);
}

int quic_open_bidi(struct quic *q, int64_t *id, void *stream_data)
{
    return ngtcp2_conn_open_bidi_stream(q->conn, id, stream_data);
}

int quic_open_uni(struct quic *q, int64_t *id)
{
    return ngtcp2_conn_open_uni_stream(q->conn, id, NULL);
}

uint64_t quic_streams_left(struct quic *q)
{
    return q->conn ? ngtcp2_conn_get_streams_bidi_left(q->conn) : 0;
}

void quic_consumed(struct quic *q, int64_t id, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(q->conn, id, n);
    ngtcp2_conn_extend_max_offset(q->conn, n);
}

void quic_shutdown_read(struct quic *q, int64_t id, uint64_t code)
{
    ngtcp2_conn_shutdown_stream_read(q->conn, 0, id, code);
}

void quic_shutdown_write(struct quic *q, int64_t id, uint64_t code)
{
    ngtcp2_conn_shutdown_stream_write(q->conn, 0, id, code);
}

bool quic_window_full(struct quic *q)
{
    return q->conn && ngtcp2_conn_get_max_data_left(q->conn) == 0;
}

/* ------------------------------------------------------------------------ */
/* The start-up check                                                         */
/* ------------------------------------------------------------------------ */

static void describe(struct quic *q, char *why, size_t len)
{
    const ngtcp2_ccerr *e = q->conn ? ngtcp2_conn_get_ccerr(q->conn) : NULL;
    unsigned alert = 0;
    bool has_alert = false;
    if (q->closed_by_peer && e->type == NGTCP2_CCERR_TYPE_TRANSPORT &&
        e->error_code >= NGTCP2_CRYPTO_ERROR && e->error_code <= NGTCP2_CRYPTO_ERROR + 0xff) {
        alert = (unsigned)(e->error_code - NGTCP2_CRYPTO_ERROR);
        has_alert = true;
    } else if (q->cause == CAUSE_TLS_HANDSHAKE && !q->closed_by_peer && q->conn) {
        alert = ngtcp2_conn_get_tls_alert(q->conn);
        has_alert = alert != 0;
    }
    unsigned status = q->tls ? gnutls_session_get_verify_cert_status(q->tls) : 0;
    if (status && run.verify_name) {
        gnutls_datum_t out;
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
            snprintf(why, len, "certificate verification failed: %s", (const char *)out.data);
            gnutls_free(out.data);
            return;
        }
    }
    if (has_alert) {
        const char *name = gnutls_alert_get_name((gnutls_alert_description_t)alert);
        snprintf(why, len, "TLS alert %u (%s)%s", alert, name ? name : "unknown",
                 alert == 120 ? ": the server does not speak HTTP/3 (ALPN h3)" : "");
    } else if (q->closed_by_peer) {
        snprintf(why, len, "the server closed the connection (%s error 0x%llx)",
                 e->type == NGTCP2_CCERR_TYPE_TRANSPORT ? "transport" : "application",
                 (unsigned long long)e->error_code);
    } else if (q->cause == CAUSE_QUIC_VERSION) {
        snprintf(why, len, "the server speaks no QUIC version volley knows (version negotiation)");
    } else if (q->cause == CAUSE_QUIC_STATELESS_RESET) {
        snprintf(why, len, "the server reset the connection (stateless reset)");
    } else if (q->cause == CAUSE_REFUSED) {
        snprintf(why, len, "%s", strerror(ECONNREFUSED));
    } else {
        snprintf(why, len, "the QUIC handshake failed (%s)", stats_cause_name(q->cause));
    }
}

bool quic_probe(const struct net_addr *addr, int timeout_ms, char *why, size_t why_len)
{
    bool in_progress;
    int fd = net_connect(addr, SOCK_DGRAM, &in_progress);
    if (fd < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        return false;
    }
    struct sock s = {.fd = fd};
    uint64_t deadline = clock_us() + (uint64_t)timeout_ms * 1000;
    int rv;
    while ((rv = quic_handshake(&s)) != IO_OK && rv != IO_ERROR) {
        struct quic *q = s.state;
        uint64_t now = clock_us(), wait = deadline > now ? deadline - now : 0;
        ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(q->conn);
        if (expiry != UINT64_MAX && expiry / 1000 < now + wait)
            wait = expiry / 1000 > now ? expiry / 1000 - now : 0;
        struct pollfd p = {.fd = fd, .events = rv == IO_WANT_WRITE ? POLLOUT : POLLIN};
        int ready = poll(&p, 1, (int)((wait + 999) / 1000));
        if (ready < 0 && errno != EINTR)
            break;
        if (ready == 0 && clock_us() >= deadline) {
            snprintf(why, why_len, "no QUIC handshake in %dms", timeout_ms);
            quic_release(&s);
            close(fd);
            return false;
        }
        if (ready == 0 && !expire(q)) {
            rv = IO_ERROR;
            break;
        }
    }
    bool ok = rv == IO_OK;
    if (ok) {
        ngtcp2_conn_info info;
        ngtcp2_conn_get_conn_info(((struct quic *)s.state)->conn, &info);
        run.initial_rtt =
            info.smoothed_rtt > QUIC_MIN_INITIAL_RTT ? info.smoothed_rtt : QUIC_MIN_INITIAL_RTT;
    } else {
        describe(s.state, why, why_len);
    }
    quic_release(&s);
    close(fd);
    return ok;
}
