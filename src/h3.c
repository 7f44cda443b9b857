/* The HTTP/3 session (RFC 9114) over nghttp3, above the QUIC transport
 * (quic.c): one client session per connection. What the connection reads
 * are datagrams, which quic_input() decrypts and whose stream data it hands
 * to nghttp3 here; what the connection writes is the batch of packets
 * quic_output() packs, pulling the streams' data from nghttp3. Each request
 * is a bidirectional stream with a record of its own (mux.c's, as HTTP/2's:
 * when it was submitted and sent, its status, what the response() hook asks
 * for), kept in submission order: the oldest gives the response timeout. A request waits
 * for a stream while the server's stream limit allows none. Header lists
 * and bodies come from the batch's request bytes through h2req, as for
 * HTTP/2 (RFC 9114 §4.2: HTTP/3's fields are HTTP/2's).
 *
 * Every request ends once: answered (its stream's end after a final
 * response), failed (a stream the server reset, a malformed response, or the
 * connection's end), or sent again when the server did not process it
 * (H3_REQUEST_REJECTED, at or above a GOAWAY's stream id: after a back-off,
 * as the sink decides; 0-RTT data the server refused: at once).
 * SPDX-License-Identifier: MIT */
#include <nghttp3/nghttp3.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "h2req.h"
#include "h3.h"
#include "mux.h"
#include "pool.h"
#include "proto.h"
#include "quic.h"
#include "request.h"
#include "xalloc.h"

/* A batch's requests as nghttp3 takes them: the header lists of h2req's
 * conversion, as nghttp3_nv. */
struct h3_msgs {
    nghttp3_nv *nv; /* every message's, one after the other */
    size_t cap;
    size_t *first; /* where message i's start in nv */
    size_t first_cap;
};

/* The bytes of a batch request() returned, copied: the connection's own
 * buffer is refilled by the next batch while this one is in flight. */
struct h3_batch {
    struct mux_batch b;
    struct h3_msgs msgs;
};

/* A request's record: what HTTP/3 keeps beside the common part. */
struct h3_stream {
    struct mux_req r;
    const nghttp3_nv *nv;
    int64_t id;   /* -1 until it has a stream (sent_at is when it got it) */
    bool blocked; /* its body waits for the server's window */
};

struct h3 {
    const struct proto_conf *conf;
    struct quic *q;
    nghttp3_conn *ng; /* while the connection is open */
    struct pool pool; /* nghttp3's memory, reused across streams and reconnects */
    nghttp3_mem mem;
    struct quic_app app;
    struct mux mux;            /* the requests in flight */
    struct h3_stream *waiting; /* the first of them that has no stream yet */
    size_t limit;              /* streams it may have open: -m, capped by the server */
    uint64_t now;              /* of the input being handled */
    size_t batches;            /* sent on this connection */
    bool draining;             /* no new stream: GOAWAY */
    bool failed;               /* the connection failed, for the reason in why */
    enum cause why;
    struct h2req_static static_copy;
    struct h3_msgs static_msgs;
};

static struct h3 *session_of(struct proto_session *session) { return (struct h3 *)(void *)session; }

static void fail(struct h3 *s, enum cause why, uint64_t code)
{
    if (!s->failed) {
        s->failed = true;
        s->why = why;
        if (s->q)
            quic_fail(s->q, code);
    }
}

/* ------------------------------------------------------------------------ */
/* Records                                                                    */
/* ------------------------------------------------------------------------ */

static struct h3_stream *stream(struct mux_req *r) { return (struct h3_stream *)(void *)r; }

/* The request is over: out of those in flight (and of those waiting for a
 * stream). */
static void unlink_stream(struct h3 *s, struct h3_stream *st)
{
    if (s->waiting == st)
        s->waiting = stream(st->r.next);
}

/* A record that never got a stream is QUIC's no more: it goes back now. */
static void settle(struct h3 *s, struct h3_stream *st)
{
    if (st->id < 0)
        mux_put(&s->mux, &st->r);
}

/* The record of a request stream in flight, by id (rare events only: most
 * callbacks carry the record). */
static struct h3_stream *find(struct h3 *s, int64_t id)
{
    for (struct mux_req *r = s->mux.head; r && stream(r) != s->waiting; r = r->next)
        if (stream(r)->id == id)
            return stream(r);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Outcomes                                                                   */
/* ------------------------------------------------------------------------ */

static void answered(struct h3 *s, struct h3_stream *st)
{
    unlink_stream(s, st);
    mux_answered(&s->mux, &st->r, s->now ? s->now : clock_us());
}

/* The server did not process it: it is sent again, unless the connection
 * refuses everything. */
static void refused(struct h3 *s, struct h3_stream *st)
{
    unlink_stream(s, st);
    s->conf->stats->h3_refused++;
    mux_refused(&s->mux, &st->r);
    settle(s, st);
}

static void stream_failed(struct h3 *s, struct h3_stream *st, enum cause why)
{
    unlink_stream(s, st);
    mux_failed(&s->mux, &st->r, why);
}

/* ------------------------------------------------------------------------ */
/* nghttp3's callbacks (conn_user_data is the session, stream_user_data the */
/* request's record)                                                         */
/* ------------------------------------------------------------------------ */

/* :status is three digits (RFC 9114 §4.3.2); anything else is 0. */
static int status_of(const uint8_t *v, size_t n)
{
    int status = 0;
    for (size_t i = 0; i < n; i++) {
        if (n != 3 || v[i] < '0' || v[i] > '9')
            return 0;
        status = status * 10 + (v[i] - '0');
    }
    return status;
}

/* A response head begins: its first byte, for the time to first byte. */
static int on_begin_headers(nghttp3_conn *ng, int64_t id, void *user, void *sd)
{
    (void)ng, (void)id;
    struct h3 *s = user;
    struct h3_stream *st = sd;
    if (st && !st->r.first_at)
        st->r.first_at = s->now ? s->now : clock_us();
    return 0;
}

static int on_header(nghttp3_conn *ng, int64_t id, int32_t token, nghttp3_rcbuf *name,
                     nghttp3_rcbuf *value, uint8_t flags, void *user, void *sd)
{
    (void)ng, (void)id, (void)flags;
    struct h3 *s = user;
    struct h3_stream *st = sd;
    if (!st || st->r.final || st->r.ended)
        return 0;
    nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
    if (token == NGHTTP3_QPACK_TOKEN__STATUS) {
        st->r.status = status_of(v.base, v.len);
        return 0;
    }
    if (!s->conf->wants->head)
        return 0;
    /* nghttp3 checked the fields (RFC 9114 §4.2): names are lower case,
     * with no CR, LF or NUL in them or in the values. */
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name);
    if (n.len && n.base[0] == ':')
        return 0;
    buf_append(&st->r.fields, n.base, n.len);
    buf_append(&st->r.fields, ": ", 2);
    buf_append(&st->r.fields, v.base, v.len);
    buf_append(&st->r.fields, "\r\n", 2);
    return 0;
}

static int on_end_headers(nghttp3_conn *ng, int64_t id, int fin, void *user, void *sd)
{
    (void)ng, (void)id, (void)fin, (void)user;
    struct h3_stream *st = sd;
    if (!st || st->r.final || st->r.ended)
        return 0;
    if (st->r.status >= 200) {
        st->r.final = true; /* trailers after it are not the hook's */
    } else {
        /* A 1xx interim head: the final one starts afresh. */
        st->r.status = 0;
        buf_clear(&st->r.fields);
    }
    return 0;
}

static int on_data(nghttp3_conn *ng, int64_t id, const uint8_t *data, size_t len, void *user,
                   void *sd)
{
    (void)ng;
    struct h3 *s = user;
    struct h3_stream *st = sd;
    quic_consumed(s->q, id, len);
    if (s->conf->wants->body && st && !st->r.ended)
        buf_append(&st->r.body, data, len);
    return 0;
}

static int on_deferred_consume(nghttp3_conn *ng, int64_t id, size_t n, void *user, void *sd)
{
    (void)ng, (void)sd;
    struct h3 *s = user;
    quic_consumed(s->q, id, n);
    return 0;
}

/* The response's end: answered after a final head; else malformed (no
 * :status, or only a 1xx one). */
static int on_end_stream(nghttp3_conn *ng, int64_t id, void *user, void *sd)
{
    (void)ng, (void)id;
    struct h3 *s = user;
    struct h3_stream *st = sd;
    if (!st || st->r.ended || s->mux.stopped)
        return 0;
    if (st->r.final)
        answered(s, st);
    else
        stream_failed(s, st, CAUSE_H3_PROTOCOL);
    return 0;
}

static int on_stream_close(nghttp3_conn *ng, int64_t id, uint64_t code, void *user, void *sd)
{
    (void)ng, (void)id;
    struct h3 *s = user;
    struct h3_stream *st = sd;
    if (!st)
        return 0;
    if (!st->r.ended && !s->mux.stopped) {
        if (code == NGHTTP3_H3_REQUEST_REJECTED)
            refused(s, st);
        else if (st->r.reset)
            stream_failed(s, st, CAUSE_STREAM_RESET);
        else /* nghttp3 reset it: the response broke the protocol */
            stream_failed(s, st, CAUSE_H3_PROTOCOL);
    }
    if (st->r.ended) /* stopped: the connection hands it back */
        mux_put(&s->mux, &st->r);
    return 0;
}

/* nghttp3 asks for the stream to be reset, or for the server to stop
 * sending on it (a malformed response). */
static int on_reset_stream(nghttp3_conn *ng, int64_t id, uint64_t code, void *user, void *sd)
{
    (void)ng, (void)sd;
    quic_shutdown_write(((struct h3 *)user)->q, id, code);
    return 0;
}

static int on_stop_sending(nghttp3_conn *ng, int64_t id, uint64_t code, void *user, void *sd)
{
    (void)ng, (void)sd;
    quic_shutdown_read(((struct h3 *)user)->q, id, code);
    return 0;
}

/* GOAWAY: no new request on this connection; those on streams at or above
 * id were not processed (RFC 9114 §5.2) and go back to be sent again. */
static int on_shutdown(nghttp3_conn *ng, int64_t id, void *user)
{
    (void)ng;
    struct h3 *s = user;
    s->conf->stats->h3_goaways++;
    s->draining = true;
    for (struct mux_req *r = s->mux.head, *next; r; r = next) {
        struct h3_stream *st = stream(r);
        next = r->next;
        if (st->id >= 0 && st->id < id)
            continue;
        if (st->id >= 0) {
            quic_shutdown_write(s->q, st->id, NGHTTP3_H3_REQUEST_CANCELLED);
            quic_shutdown_read(s->q, st->id, NGHTTP3_H3_REQUEST_CANCELLED);
        }
        refused(s, st);
    }
    return 0;
}

/* A request body: nghttp3 frames it as DATA straight from the request's
 * bytes, which stay alive until the stream closes. */
static nghttp3_ssize read_body(nghttp3_conn *ng, int64_t id, nghttp3_vec *v, size_t n,
                               uint32_t *flags, void *user, void *sd)
{
    (void)ng, (void)id, (void)n, (void)user;
    struct h3_stream *st = sd;
    v[0].base = (uint8_t *)st->r.msg->body;
    v[0].len = st->r.msg->body_len;
    *flags |= NGHTTP3_DATA_FLAG_EOF;
    return 1;
}

static const nghttp3_callbacks callbacks = {
    .begin_headers = on_begin_headers,
    .stream_close = on_stream_close,
    .recv_data = on_data,
    .deferred_consume = on_deferred_consume,
    .recv_header = on_header,
    .end_headers = on_end_headers,
    .stop_sending = on_stop_sending,
    .end_stream = on_end_stream,
    .reset_stream = on_reset_stream,
    .shutdown = on_shutdown,
};

/* ------------------------------------------------------------------------ */
/* QUIC's events (arg is the session)                                         */
/* ------------------------------------------------------------------------ */

/* nghttp3's error, for the connection: its cause and the code QUIC's
 * CONNECTION_CLOSE carries. */
static int h3_error(struct h3 *s, long rv)
{
    fail(s, CAUSE_H3_PROTOCOL, nghttp3_err_infer_quic_app_error_code((int)rv));
    return -1;
}

static int app_recv(void *arg, int64_t id, const uint8_t *data, size_t len, bool fin)
{
    struct h3 *s = arg;
    nghttp3_ssize n = nghttp3_conn_read_stream(s->ng, id, data, len, fin);
    if (n < 0)
        return h3_error(s, n);
    quic_consumed(s->q, id, (size_t)n);
    return 0;
}

static int app_acked(void *arg, int64_t id, uint64_t len)
{
    struct h3 *s = arg;
    int rv = nghttp3_conn_add_ack_offset(s->ng, id, len);
    return rv ? h3_error(s, rv) : 0;
}

static int app_closed(void *arg, int64_t id, uint64_t code)
{
    struct h3 *s = arg;
    int rv = nghttp3_conn_close_stream(s->ng, id, code);
    /* A stream opened that carried nothing nghttp3 saw is none of its. */
    if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND)
        return 0;
    return rv ? h3_error(s, rv) : 0;
}

/* The server reset a request stream (RESET_STREAM) or asked it to stop
 * sending (STOP_SENDING): counted by code; the stream's close says the rest. */
static int app_reset(void *arg, int64_t id, uint64_t code)
{
    struct h3 *s = arg;
    struct h3_stream *st = find(s, id);
    if (st && !st->r.reset) {
        uint64_t i = code - NGHTTP3_H3_NO_ERROR;
        s->conf->stats->h3_resets[code >= NGHTTP3_H3_NO_ERROR && i < STATS_H3_CODES - 1
                                      ? i
                                      : STATS_H3_CODES - 1]++;
        st->r.reset = code != NGHTTP3_H3_REQUEST_REJECTED;
    }
    int rv = nghttp3_conn_shutdown_stream_read(s->ng, id);
    return rv ? h3_error(s, rv) : 0;
}

static void open_streams(struct h3 *s);

static int app_streams(void *arg)
{
    open_streams(arg);
    return 0;
}

static int app_unblocked(void *arg, int64_t id)
{
    struct h3 *s = arg;
    struct h3_stream *st = find(s, id);
    if (st)
        st->blocked = false;
    int rv = nghttp3_conn_unblock_stream(s->ng, id);
    return rv ? h3_error(s, rv) : 0;
}

static long app_pull(void *arg, int64_t *id, int *fin, ngtcp2_vec *v, size_t n)
{
    struct h3 *s = arg;
    nghttp3_vec vec[16];
    if (n > sizeof vec / sizeof vec[0])
        n = sizeof vec / sizeof vec[0];
    nghttp3_ssize k = nghttp3_conn_writev_stream(s->ng, id, fin, vec, n);
    if (k < 0)
        return h3_error(s, k);
    for (nghttp3_ssize i = 0; i < k; i++)
        v[i] = (ngtcp2_vec){.base = vec[i].base, .len = vec[i].len};
    return (long)k;
}

static int app_pushed(void *arg, int64_t id, size_t n)
{
    struct h3 *s = arg;
    int rv = nghttp3_conn_add_write_offset(s->ng, id, n);
    return rv ? h3_error(s, rv) : 0;
}

static void app_blocked(void *arg, int64_t id)
{
    struct h3 *s = arg;
    struct h3_stream *st = find(s, id);
    if (st)
        st->blocked = true;
    nghttp3_conn_block_stream(s->ng, id);
}

static void app_shut(void *arg, int64_t id)
{
    nghttp3_conn_shutdown_stream_write(((struct h3 *)arg)->ng, id);
}

static bool start_session(struct h3 *s);

/* The server refused the 0-RTT data: every request it carried goes back to
 * be sent again at once (the server did nothing wrong), on a session
 * started afresh; QUIC forgot their streams. */
static int app_early_rejected(void *arg)
{
    struct h3 *s = arg;
    for (struct mux_req *r = s->mux.head, *next; r; r = next) {
        next = r->next;
        unlink_stream(s, stream(r));
        s->conf->stats->h3_refused++;
        mux_returned(&s->mux, r);
        mux_put(&s->mux, r);
    }
    nghttp3_conn_del(s->ng);
    s->ng = NULL;
    return start_session(s) ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                   */
/* ------------------------------------------------------------------------ */

/* nghttp3's header lists for a conversion (nghttp3 copies what it sends). */
static void msgs_build(struct h3_msgs *m, const struct h2req *conv)
{
    size_t total = 0;
    for (size_t i = 0; i < conv->count; i++)
        total += conv->msgs[i].nvlen;
    if (total > m->cap) {
        m->cap = total;
        m->nv = xrealloc(m->nv, total * sizeof *m->nv);
    }
    if (conv->count > m->first_cap) {
        m->first_cap = conv->count;
        m->first = xrealloc(m->first, conv->count * sizeof *m->first);
    }
    size_t k = 0;
    for (size_t i = 0; i < conv->count; i++) {
        const struct h2req_msg *msg = &conv->msgs[i];
        m->first[i] = k;
        for (size_t j = 0; j < msg->nvlen; j++, k++)
            m->nv[k] = (nghttp3_nv){.name = msg->nv[j].name,
                                    .value = msg->nv[j].value,
                                    .namelen = msg->nv[j].namelen,
                                    .valuelen = msg->nv[j].valuelen};
    }
}

static void msgs_free(struct h3_msgs *m)
{
    free(m->nv);
    free(m->first);
}

static void batch_free(struct mux_batch *b) { msgs_free(&((struct h3_batch *)(void *)b)->msgs); }

/* Give the requests that wait a stream each, as far as the server's limit
 * allows; nghttp3 frames their HEADERS (and DATA) for the next output. */
static void open_streams(struct h3 *s)
{
    while (s->waiting && !s->failed && s->ng) {
        struct h3_stream *st = s->waiting;
        if (quic_streams_left(s->q) == 0 || quic_open_bidi(s->q, &st->id, st) != 0)
            break;
        nghttp3_data_reader body = {.read_data = read_body};
        int rv = nghttp3_conn_submit_request(s->ng, st->id, st->nv, st->r.msg->nvlen,
                                             st->r.msg->body_len ? &body : NULL, st);
        if (rv != 0) {
            h3_error(s, rv);
            break;
        }
        st->r.sent_at = clock_us();
        if (quic_early(s->q) && !quic_over(s->q))
            s->conf->stats->h3_early_requests++;
        s->waiting = stream(st->r.next);
    }
}

/* ------------------------------------------------------------------------ */
/* The operations                                                             */
/* ------------------------------------------------------------------------ */

static struct proto_session *h3_create(const struct proto_conf *conf, const struct proto_sink *sink,
                                       void *arg)
{
    struct h3 *s = xcalloc(1, sizeof *s);
    s->conf = conf;
    mux_init(&s->mux, sink, arg, sizeof(struct h3_stream), sizeof(struct h3_batch));
    s->app = (struct quic_app){
        .arg = s,
        .recv = app_recv,
        .acked = app_acked,
        .closed = app_closed,
        .reset = app_reset,
        .streams = app_streams,
        .unblocked = app_unblocked,
        .pull = app_pull,
        .pushed = app_pushed,
        .blocked = app_blocked,
        .shut = app_shut,
        .early_rejected = app_early_rejected,
        .no_error = NGHTTP3_H3_NO_ERROR,
    };
    /* nghttp3 allocates and frees the same few sizes for every stream. */
    s->mem =
        (nghttp3_mem){&s->pool, pool_mem_malloc, pool_mem_free, pool_mem_calloc, pool_mem_realloc};
    return (struct proto_session *)(void *)s;
}

static void h3_destroy(struct proto_session *session)
{
    struct h3 *s = session_of(session);
    if (s->ng)
        nghttp3_conn_del(s->ng);
    mux_free(&s->mux, batch_free);
    h2req_static_free(&s->static_copy);
    msgs_free(&s->static_msgs);
    pool_clear(&s->pool);
    free(s);
}

/* nghttp3's client session and its three streams: control and QPACK's. */
static bool start_session(struct h3 *s)
{
    nghttp3_settings settings;
    nghttp3_settings_default(&settings);
    int64_t control, encoder, decoder;
    if (nghttp3_conn_client_new(&s->ng, &callbacks, &settings, &s->mem, s) != 0)
        die("HTTP/3: out of memory");
    if (quic_open_uni(s->q, &control) != 0 || quic_open_uni(s->q, &encoder) != 0 ||
        quic_open_uni(s->q, &decoder) != 0) {
        /* RFC 9114 §6.2: a server must allow the three. */
        fail(s, CAUSE_H3_PROTOCOL, NGHTTP3_H3_STREAM_CREATION_ERROR);
        return false;
    }
    if (nghttp3_conn_bind_control_stream(s->ng, control) != 0 ||
        nghttp3_conn_bind_qpack_streams(s->ng, encoder, decoder) != 0)
        die("HTTP/3: out of memory");
    return true;
}

static void h3_open(struct proto_session *session, struct sock *sock)
{
    struct h3 *s = session_of(session);
    s->q = quic_of(sock);
    s->limit = s->conf->streams;
    s->batches = 0;
    s->draining = s->failed = s->mux.stopped = false;
    s->now = 0;
    if (!start_session(s))
        return;
    /* The server's limit on the streams open at once (its transport
     * parameter; MAX_STREAMS raises the total as streams close). */
    uint64_t most = quic_streams_left(s->q);
    struct stats *stats = s->conf->stats;
    if (most < s->limit)
        s->limit = (size_t)most;
    if (s->limit < stats->h3_streams)
        stats->h3_streams = s->limit;
    quic_attach(s->q, &s->app);
}

static bool h3_ready(const struct proto_session *session)
{
    const struct h3 *s = (const struct h3 *)(const void *)session;
    if (!s->ng || s->draining || s->failed || (s->conf->no_keepalive && s->batches))
        return false;
    return mux_room(&s->mux, s->conf->depth, s->limit);
}

static void h3_submit(struct proto_session *session, const struct request *r, bool own, size_t n,
                      uint64_t now, uint64_t start_at)
{
    struct h3 *s = session_of(session);
    struct h3_batch *b = NULL;
    const struct h2req *conv;
    const struct h3_msgs *msgs;
    if (own) {
        b = (struct h3_batch *)(void *)mux_batch(&s->mux);
        if (h2req_batch_set(&b->b.copy, r, s->conf->tls, "HTTP/3"))
            msgs_build(&b->msgs, &b->b.copy.conv);
        conv = &b->b.copy.conv;
        msgs = &b->msgs;
    } else {
        const struct request *was = s->static_copy.req;
        const char *data = s->static_copy.data;
        conv = h2req_static(&s->static_copy, r, s->conf->tls, "HTTP/3");
        if (was != r || data != r->data || s->static_msgs.first_cap == 0)
            msgs_build(&s->static_msgs, conv);
        msgs = &s->static_msgs;
    }
    s->batches++;
    for (size_t i = 0; i < n; i++) {
        struct h3_stream *st =
            stream(mux_add(&s->mux, b ? &b->b : NULL, &conv->msgs[i], now, start_at));
        st->nv = msgs->nv + msgs->first[i];
        st->id = -1;
        st->blocked = false;
        if (!s->waiting)
            s->waiting = st;
    }
    open_streams(s);
}

static size_t h3_output(struct proto_session *session, const char **data)
{
    struct h3 *s = session_of(session);
    return s->q ? quic_output(s->q, data) : 0;
}

static void h3_wrote(struct proto_session *session, size_t n)
{
    quic_wrote(session_of(session)->q, n);
}

/* After input, or QUIC's timer: whether the connection goes on. */
static enum proto_status verdict(struct h3 *s, enum cause *cause)
{
    if (s->failed) {
        *cause = s->why;
        return PROTO_FAIL;
    }
    if (quic_over(s->q)) {
        /* The server closed without an error, or went quiet for the idle
         * timeout: a normal end while nothing was outstanding. */
        enum cause why = quic_cause(s->q);
        if (s->mux.inflight == 0 && (why == CAUSE_CLOSED || why == CAUSE_QUIC_IDLE_TIMEOUT))
            return PROTO_CLOSE;
        *cause = why;
        return PROTO_FAIL;
    }
    if (s->mux.inflight == 0 && (s->draining || (s->conf->no_keepalive && s->batches)))
        return PROTO_CLOSE;
    return PROTO_OK;
}

static enum proto_status h3_input(struct proto_session *session, const char *buf, size_t len,
                                  uint64_t now, enum cause *cause)
{
    struct h3 *s = session_of(session);
    s->now = now;
    quic_input(s->q, buf, len);
    s->now = 0;
    if (s->mux.stopped)
        return PROTO_OK;
    return verdict(s, cause);
}

static enum proto_status h3_wake(struct proto_session *session, uint64_t now, enum cause *cause)
{
    (void)now;
    return verdict(session_of(session), cause);
}

/* QUIC has no end of stream: the connection's end comes as a cause. */
static enum proto_status h3_eof(struct proto_session *session, uint64_t now, enum cause *cause)
{
    (void)now;
    struct h3 *s = session_of(session);
    enum proto_status st = verdict(s, cause);
    if (st == PROTO_OK) {
        *cause = CAUSE_CLOSED;
        return s->mux.inflight ? PROTO_FAIL : PROTO_CLOSE;
    }
    return st;
}

static size_t h3_inflight(const struct proto_session *session)
{
    return ((const struct h3 *)(const void *)session)->mux.inflight;
}

static uint64_t h3_oldest(const struct proto_session *session)
{
    const struct h3 *s = (const struct h3 *)(const void *)session;
    return s->mux.head ? s->mux.head->queued_at : 0;
}

static enum cause h3_expired(const struct proto_session *session)
{
    const struct h3 *s = (const struct h3 *)(const void *)session;
    const struct h3_stream *st = stream(s->mux.head);
    if (st && st->id < 0) /* the oldest never got a stream */
        return CAUSE_STREAM_LIMIT;
    /* Its body waits for a window: the stream's, or the connection's. */
    if (st && (st->blocked || (s->q && quic_window_full(s->q))))
        return CAUSE_FLOW_CONTROL;
    return CAUSE_RESPONSE_TIMEOUT;
}

/* The connection is going: every record goes back, whatever its state
 * (nghttp3_conn_del calls no callback). */
static void h3_abort(struct proto_session *session)
{
    struct h3 *s = session_of(session);
    if (s->ng) {
        nghttp3_conn_del(s->ng);
        s->ng = NULL;
    }
    mux_abort(&s->mux);
    s->waiting = NULL;
    s->q = NULL;
}

/* Over HTTP/3 a request is HEADERS (and DATA) frames made from its bytes,
 * HTTP/2's fields (RFC 9114 §4.2): what HTTP/2 cannot carry, HTTP/3 cannot. */
static bool h3_check(const struct request *r, bool tls, char *err, size_t errlen)
{
    struct h2req check = {0};
    bool ok = h2req_build_for(&check, r, tls, "HTTP/3", err, errlen);
    h2req_free(&check);
    return ok;
}

const struct proto_ops proto_h3 = {
    .name = "HTTP/3",
    .alpn = "h3",
    .figures = STATS_AT_HTTP3,
    .multiplexed = true,
    .check = h3_check,
    .transport = &transport_quic,
    .create = h3_create,
    .destroy = h3_destroy,
    .open = h3_open,
    .ready = h3_ready,
    .submit = h3_submit,
    .output = h3_output,
    .wrote = h3_wrote,
    .input = h3_input,
    .eof = h3_eof,
    .wake = h3_wake,
    .inflight = h3_inflight,
    .oldest = h3_oldest,
    .expired = h3_expired,
    .abort = h3_abort,
};
