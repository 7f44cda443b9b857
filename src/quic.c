/* The QUIC transport: an ngtcp2 client connection over a connection's
 * connected UDP socket, driven by the connection machine (conn.c) through
 * the transport's operations and by the HTTP/3 session (h3.c) through its
 * streams. It owns the connection's life: the handshake (its TLS is
 * quic_tls.c's), reading what came and packing what goes, the timers, and
 * what its end says (a TLS alert, CONNECTION_CLOSE, a stateless reset),
 * with QUIC's figures. A connection slot keeps, across reconnects, what
 * the next handshake may use: the session ticket (quic_tls.c), the server's
 * transport parameters (0-RTT, with --0rtt) and its address-validation
 * token.
 *
 * Packets go out in batches: quic_output() packs up to a batch of packets
 * (every one the same size but the last), which the transport's write()
 * hands to udp.c, one system call a batch (GSO or sendmmsg); read() takes
 * a batch of datagrams (GRO or recvmmsg) and quic_input() feeds each to
 * ngtcp2. The loss-recovery, pacing and idle timers are one ev_timer on the
 * worker's loop, set from ngtcp2_conn_get_expiry() after every batch in or
 * out; when it fires the connection is woken (sock->wake) to write what
 * recovery sends, or to close.
 * SPDX-License-Identifier: MIT */
#include "quic.h"

#include <errno.h>
#include <ev.h>
#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "buf.h"
#include "clock.h"
#include "pool.h"
#include "quic_tls.h"
#include "udp.h"
#include "xalloc.h"

/* The largest UDP payload volley sends (ngtcp2's default, which fits an
 * Ethernet MTU over IPv6) and accepts (the transport parameter: a little
 * more, for servers that probe a path's MTU on loopback). */
#define QUIC_TX_PAYLOAD 1452
#define QUIC_RX_PAYLOAD UDP_PAYLOAD_MAX
/* The least RTT a handshake assumes before it has measured one: the
 * start-up check's measure, but no less than this, so that a server slow to
 * answer a handshake gets no spurious retransmissions. */
#define QUIC_MIN_INITIAL_RTT (50 * NGTCP2_MILLISECONDS)
/* The flow-control windows volley opens to the server: a response never
 * waits for a window update, and the windows move as the session consumes
 * what arrives. The socket's receive buffer (udp.c) is sized to hold a
 * burst of that order. */
#define QUIC_STREAM_WINDOW (16u * 1024 * 1024)
#define QUIC_CONN_WINDOW (64u * 1024 * 1024)
/* Closed with no word from the server for this long; a request in flight
 * meets --timeout first unless it is longer. */
#define QUIC_IDLE_TIMEOUT (30 * NGTCP2_SECONDS)
/* Unidirectional streams the server may open: its control stream, QPACK's
 * two and some to spare (reserved stream types it may send, RFC 9114 §6.2.3). */
#define QUIC_UNI_STREAMS 16

/* Set up once by quic_setup before the workers start, only read after. */
static struct {
    bool ecn;                    /* --ecn: packets marked as ngtcp2 says, marks received read */
    ngtcp2_duration initial_rtt; /* from the start-up check, or 0 */
} run;

/* A record of stream data that came before the session was attached (in
 * the packet that completed the handshake), replayed to it then. */
struct early_rx {
    int64_t id;
    size_t len;
    bool fin;
};

struct quic {
    struct sock *sock;
    /* Kept across reconnects: what the next handshake may use (and in tls,
     * the session ticket). */
    uint8_t params[256]; /* the server's transport parameters for 0-RTT */
    size_t params_len;
    uint8_t *token; /* NEW_TOKEN, for address validation */
    size_t token_len;
    struct pool pool; /* ngtcp2's memory, reused across packets and reconnects */
    ngtcp2_mem mem;
    /* The current connection. */
    ngtcp2_conn *conn;
    struct quic_tls tls;
    struct udp udp;
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
    bool early;               /* 0-RTT was attempted */
    bool completed;           /* the handshake completed */
    enum cause cause;         /* why it is over */
    enum tls_failure tls_why; /* cause CAUSE_TLS_HANDSHAKE: why */
    struct udp_batch tx;      /* the packets to send */
};

static uint64_t now_ns(void) { return clock_us() * 1000; }

struct quic *quic_of(struct sock *s) { return s->state; }

/* ------------------------------------------------------------------------ */
/* The run's credentials                                                      */
/* ------------------------------------------------------------------------ */

void quic_setup(const struct quic_options *o)
{
    quic_tls_setup(&o->tls);
    run.ecn = o->ecn;
}

void quic_cleanup(void)
{
    quic_tls_cleanup();
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
 * as a CRYPTO_ERROR) or one GnuTLS raised here (local: mostly a certificate
 * that does not verify). */
static void count_alert(struct quic *q, unsigned alert, bool local)
{
    struct stats *st = figures(q);
    if (st)
        st->h3_alerts[alert & 0xff]++;
    enum tls_failure why = stats_tls_alert_failure(alert);
    q->tls_why = local && why == TLS_FAIL_CERT_REFUSED ? TLS_FAIL_CERT_VERIFY : why;
}

/* The peer's CONNECTION_CLOSE: by its code, transport or application. */
static void peer_closed(struct quic *q)
{
    const ngtcp2_ccerr *e = ngtcp2_conn_get_ccerr(q->conn);
    struct stats *st = figures(q);
    q->closed_by_peer = true;
    if (e->type == NGTCP2_CCERR_TYPE_TRANSPORT && e->error_code >= NGTCP2_CRYPTO_ERROR &&
        e->error_code <= NGTCP2_CRYPTO_ERROR + 0xff) {
        count_alert(q, (unsigned)(e->error_code - NGTCP2_CRYPTO_ERROR), false);
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
        count_alert(q, ngtcp2_conn_get_tls_alert(q->conn), true);
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
        q->tls_why = TLS_FAIL_OTHER;
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
    if (quic_tls_early_taken(&q->tls)) {
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
    udp_open(&q->udp, s->fd, q->remote.ss_family == AF_INET6, run.ecn);
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
    if (!quic_tls_start(&q->tls, conn_of_ref, q) ||
        ngtcp2_conn_client_new(&q->conn, &dcid, &scid, &q->path, NGTCP2_PROTO_VER_V1, &callbacks,
                               &settings, &params, &q->mem, q) != 0)
        die("HTTP/3: out of memory");
    ngtcp2_conn_set_tls_native_handle(q->conn, q->tls.session);
    ngtcp2_ccerr_default(&q->ccerr);
    q->over = q->closed_by_peer = q->stateless_reset = q->version_negotiation = false;
    q->completed = q->early = false;
    q->tls_why = TLS_FAIL_OTHER;
    q->app = NULL;
    udp_batch_clear(&q->tx);
    buf_clear(&q->stash);
    /* --0rtt: with a ticket and the server's parameters, requests go out
     * in the first flight; the session opens at once. */
    if (quic_tls_may_send_early(&q->tls) && q->params_len &&
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

bool quic_expire(struct quic *q)
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
    quic_expire(q);
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

static ssize_t quic_read(struct sock *s, char *buf, size_t len)
{
    struct quic *q = s->state;
    if (q->over)
        return IO_ERROR;
    ssize_t n = udp_read(&q->udp, buf, len);
    return n < 0 ? read_error(q, errno) : n;
}

static bool feed(struct quic *q, const char *data, size_t len, ngtcp2_tstamp ts)
{
    struct stats *st = figures(q);
    if (st)
        st->h3_packets_received++;
    /* Fewer than 21 bytes are never a QUIC packet (RFC 9000 §10.3). */
    if (len < 21)
        return true;
    ngtcp2_pkt_info pi = {.ecn = q->udp.rx_ecn};
    if (st && run.ecn)
        st->h3_ecn[q->udp.rx_ecn]++;
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
    struct udp_cursor c = {0};
    size_t at, n;
    while (udp_next(&q->udp, &c, len, &at, &n) && feed(q, buf + at, n, ts))
        ;
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

/* Pack the next batch into q->tx (udp.c's: packets of one size but the
 * last, with the same marks), as many as the congestion controller's send
 * quantum and one batch allow. */
static void fill(struct quic *q)
{
    ngtcp2_tstamp ts = now_ns();
    struct stats *st = figures(q);
    size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(q->conn);
    size_t limit = ngtcp2_conn_get_send_quantum(q->conn);
    udp_batch_begin(&q->tx, limit < UDP_BATCH_BYTES ? limit : UDP_BATCH_BYTES, max);
    char *dest;
    while ((dest = udp_batch_room(&q->tx)) != NULL) {
        ngtcp2_pkt_info pi = {0};
        ngtcp2_ssize n = pack(q, (uint8_t *)dest, max, &pi, ts);
        if (n < 0)
            failed(q, (int)n);
        if (n <= 0)
            break;
        if (st)
            st->h3_packets_sent++;
        if (!udp_batch_add(&q->tx, (size_t)n, run.ecn ? pi.ecn : NGTCP2_ECN_NOT_ECT))
            break;
    }
    if (q->tx.end)
        ngtcp2_conn_update_pkt_tx_time(q->conn, ts);
}

size_t quic_output(struct quic *q, const char **data)
{
    if (q->tx.off == q->tx.end) {
        if (!q->conn || q->over)
            return 0;
        fill(q);
        arm(q);
    }
    *data = q->tx.buf.data + q->tx.off;
    return q->tx.end - q->tx.off;
}

void quic_wrote(struct quic *q, size_t n) { q->tx.off += n; }

static ssize_t write_error(struct quic *q, int err)
{
    if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS || err == EINTR)
        return IO_WANT_WRITE;
    end(q, err == ECONNREFUSED ? CAUSE_REFUSED : CAUSE_WRITE_OTHER);
    errno = err;
    return IO_ERROR;
}

static ssize_t quic_write(struct sock *s, const char *buf, size_t len)
{
    struct quic *q = s->state;
    /* What is left of the batch starts on a datagram's boundary. */
    size_t seg = q->tx.seg ? q->tx.seg : len;
    ssize_t n = udp_send(&q->udp, buf, len, seg, q->tx.ecn);
    return n < 0 ? write_error(q, errno) : n;
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
    return q && quic_tls_resumed(&q->tls);
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
    quic_tls_end(&q->tls);
    q->conn = NULL;
    q->app = NULL;
    udp_batch_clear(&q->tx);
    buf_reset(&q->stash, 0);
}

static void quic_release(struct sock *s)
{
    struct quic *q = s->state;
    if (!q)
        return;
    quic_close(s);
    quic_tls_free(&q->tls);
    free(q->token);
    buf_free(&q->tx.buf);
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

/* Why the TLS handshake failed, when that is its cause. */
static int quic_tls_failure(struct sock *s)
{
    struct quic *q = s->state;
    return q ? (int)q->tls_why : TLS_FAIL_OTHER;
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
    .failure = quic_tls_failure,
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
/* For the start-up check                                                     */
/* ------------------------------------------------------------------------ */

void quic_describe(struct quic *q, char *why, size_t len)
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
    if (quic_tls_why(&q->tls, has_alert, alert, why, len))
        return;
    if (q->closed_by_peer) {
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

uint64_t quic_expiry_us(struct quic *q)
{
    ngtcp2_tstamp expiry = q->conn ? ngtcp2_conn_get_expiry(q->conn) : UINT64_MAX;
    return expiry == UINT64_MAX ? UINT64_MAX : expiry / 1000;
}

void quic_measured(struct quic *q)
{
    ngtcp2_conn_info info;
    ngtcp2_conn_get_conn_info(q->conn, &info);
    run.initial_rtt =
        info.smoothed_rtt > QUIC_MIN_INITIAL_RTT ? info.smoothed_rtt : QUIC_MIN_INITIAL_RTT;
}
