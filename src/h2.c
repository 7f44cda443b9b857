/* The HTTP/2 session (RFC 9113) over libnghttp2: one client session per
 * connection, with no I/O of its own. What the connection reads goes to
 * nghttp2_session_mem_recv; what nghttp2_session_mem_send serializes is
 * gathered into one output buffer, so a turn of the loop costs one write
 * however many frames it carries. Each request is a stream with a record of
 * its own (mux.c's, as HTTP/3's: when it was submitted and sent, its status,
 * what the response() hook asks for), kept in submission order: the oldest
 * gives the response timeout. Header lists and bodies come from the batch's request bytes
 * through h2req without copies, and stay alive until nghttp2 is done with
 * the stream.
 *
 * Every request ends once: answered (END_STREAM), failed (RST_STREAM, a
 * malformed response, or the connection's error), or handed back to -n's
 * budget to be sent again when the server did not process it
 * (REFUSED_STREAM, above a GOAWAY's last stream id, or never sent before the
 * GOAWAY came), as long as the connection does not refuse everything.
 *
 * nghttp2's own checks of HTTP messages are off: they look at every field
 * of every response whatever volley needs. volley makes the checks of RFC
 * 9113 §8.1.1 and §8.2 itself, in one pass over the fields nghttp2 decodes,
 * with or without a response() hook, so a response counts the same whatever
 * the script.
 *
 * What it checks before a run (a request, a cleartext target) is in
 * h2_start.c.
 * SPDX-License-Identifier: MIT */
#include "h2.h"

#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "h2_start.h"
#include "h2req.h"
#include "http.h"
#include "http_request.h"
#include "mux.h"
#include "net.h"
#include "pool.h"
#include "proto.h"
#include "request.h"
#include "xalloc.h"

/* The flow-control windows volley opens to the server, for each stream and
 * for the connection (h2load's default): responses never wait for a
 * WINDOW_UPDATE, and few are sent. */
#define H2_WINDOW ((1 << 30) - 1)
/* Output gathered from nghttp2 before it is written. */
#define H2_OUT_MAX (64 * 1024)
/* Stream ids end at 2^31 - 1 (RFC 9113 §5.1.1): a connection near the end
 * takes no more batches, finishes its streams and is reopened. */
#define H2_LAST_ID 0x7fffffff

/* A request's record: what HTTP/2 keeps beside the common part. */
struct h2_stream {
    struct mux_req r;
    size_t body_off;   /* of msg's body, handed to nghttp2 */
    size_t head;       /* its response's header lists so far (RFC 9113 §6.5.2) */
    int64_t length;    /* the final head's content-length, or -1 */
    uint64_t received; /* DATA payload bytes of the response */
    bool status_seen;  /* in the header block being read: :status came */
    bool regular_seen; /* ... and a regular field */
};

struct h2 {
    const struct proto_conf *conf;
    nghttp2_session *ng; /* while the connection is open */
    nghttp2_session_callbacks *callbacks;
    nghttp2_option *option;
    struct pool pool; /* nghttp2's memory, reused across streams and reconnects */
    nghttp2_mem mem;
    struct mux mux;         /* the requests in flight */
    size_t limit;           /* streams it may have open: -m, capped by the server */
    uint64_t settings_at;   /* its SETTINGS went out unacknowledged, or 0 */
    uint64_t now;           /* of the input or output being handled */
    struct h2_stream *last; /* stream_of's: the record of stream last_id */
    int32_t last_id;
    size_t batches; /* sent on this connection */
    bool draining;  /* no new stream: GOAWAY, or out of stream ids */
    bool failed;    /* the connection failed, for the reason in why */
    enum cause why;
    struct buf out; /* gathered output; out_off of it written */
    size_t out_off;
    bool offered; /* out was handed to a write: it may not grow until written */
    /* The static request's conversion, made once. */
    struct h2req_static static_copy;
};

static void fail(struct h2 *s, enum cause why)
{
    if (!s->failed) {
        s->failed = true;
        s->why = why;
    }
}

/* ------------------------------------------------------------------------ */
/* Records                                                                    */
/* ------------------------------------------------------------------------ */

static struct h2_stream *stream(struct mux_req *r) { return (struct h2_stream *)(void *)r; }

/* nghttp2 is done with the stream: its record can be reused. */
static void stream_put(struct h2 *s, struct h2_stream *st)
{
    if (s->last == st)
        s->last_id = 0;
    mux_put(&s->mux, &st->r);
}

/* The server did not process it: it is sent again, unless the connection
 * refuses everything. */
static void refused(struct h2 *s, struct h2_stream *st)
{
    s->conf->stats->h2_refused++;
    mux_refused(&s->mux, &st->r);
}

/* The response to stream id is malformed (RFC 9113 §8.1.1): its request
 * fails, and the stream is reset unless the server has ended it. */
static void malformed(struct h2 *s, struct h2_stream *st, int32_t id, enum cause why, bool ended)
{
    mux_failed(&s->mux, &st->r, why);
    if (!ended)
        nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_PROTOCOL_ERROR);
}

/* Its response has no content (RFC 9110 §6.3): after HEAD, 204 and 304. */
static bool bodiless(const struct h2_stream *st)
{
    return st->r.msg->head || st->r.status == 204 || st->r.status == 304;
}

/* The connection failed with a GOAWAY this error code, ours or the server's. */
static enum cause goaway_cause(uint32_t code)
{
    switch (code) {
    case NGHTTP2_FLOW_CONTROL_ERROR:
        return CAUSE_FLOW_CONTROL;
    case NGHTTP2_ENHANCE_YOUR_CALM:
        return CAUSE_H2_FLOOD;
    default:
        return CAUSE_H2_PROTOCOL;
    }
}

/* ------------------------------------------------------------------------ */
/* nghttp2's callbacks (user_data is the connection)                          */
/* ------------------------------------------------------------------------ */

/* The record of stream id. The callbacks of one frame, and of one response,
 * come one after the other: the last one found is kept. */
static struct h2_stream *stream_of(struct h2 *s, int32_t id)
{
    if (id != s->last_id) {
        s->last = nghttp2_session_get_stream_user_data(s->ng, id);
        s->last_id = id;
    }
    return s->last;
}

/* :status is three digits (RFC 9113 §8.3.2), 100 to 999; anything else
 * is 0. */
static int status_of(const uint8_t *v, size_t n)
{
    int status = 0;
    for (size_t i = 0; i < n; i++) {
        if (n != 3 || v[i] < '0' || v[i] > '9')
            return 0;
        status = status * 10 + (v[i] - '0');
    }
    return status >= 100 ? status : 0;
}

#define FIELD_IS(name, n, lit) ((n) == sizeof(lit) - 1 && memcmp((name), (lit), (n)) == 0)

/* A content-length (RFC 9110 §8.6): digits, once, not in a 1xx head, and 0
 * or absent in a 204. */
static bool content_length(struct h2_stream *st, const uint8_t *v, size_t n)
{
    int64_t length = 0;
    if (st->length >= 0 || st->r.status < 200 || n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9' || length > (INT64_MAX - 9) / 10)
            return false;
        length = length * 10 + (v[i] - '0');
    }
    st->length = length;
    return st->r.status != 204 || length == 0;
}

/* A regular field of a response head: no capitals in its name (RFC 9113
 * §8.2.1; a name from HPACK's static table has none) and not one of
 * HTTP/1.1's connection-specific fields (§8.2.2). Other characters a field
 * may not have leave the field out of what the hook gets, as nghttp2 leaves
 * them out for h2load and curl. */
static bool regular_field(struct h2_stream *st, const uint8_t *name, size_t namelen,
                          const uint8_t *value, size_t valuelen, bool static_name)
{
    for (size_t i = 0; i < namelen && !static_name; i++)
        if (name[i] >= 'A' && name[i] <= 'Z')
            return false;
    switch (namelen) {
    case 2: /* TE is allowed with "trailers" alone */
        return !FIELD_IS(name, namelen, "te") ||
               (valuelen == 8 && strncasecmp((const char *)value, "trailers", 8) == 0);
    case 7:
        return !FIELD_IS(name, namelen, "upgrade");
    case 10:
        return !FIELD_IS(name, namelen, "connection") && !FIELD_IS(name, namelen, "keep-alive");
    case 14:
        return !FIELD_IS(name, namelen, "content-length") || st->r.final ||
               content_length(st, value, valuelen);
    case 16:
        return !FIELD_IS(name, namelen, "proxy-connection");
    case 17:
        return !FIELD_IS(name, namelen, "transfer-encoding");
    default:
        return true;
    }
}

/* One field of a header block: CAUSE_COUNT when it is fine, or what makes
 * the response fail. Every block of the response (interim heads, the final
 * head, trailers) counts towards one HTTP/1.1 head's limit, as SETTINGS
 * asked the server; past it, the rest is not looked at, so a few bytes of
 * HPACK references cost no more memory than that. */
static enum cause check_field(struct h2_stream *st, const uint8_t *name, size_t namelen,
                              const uint8_t *value, size_t valuelen, bool static_name)
{
    st->head += namelen + valuelen + 32;
    if (st->head > HTTP_MAX_HEAD)
        return CAUSE_HEAD_TOO_LARGE;
    if (namelen == 0 || name[0] != ':') {
        st->regular_seen = true;
        return regular_field(st, name, namelen, value, valuelen, static_name) ? CAUSE_COUNT
                                                                              : CAUSE_H2_PROTOCOL;
    }
    /* RFC 9113 §8.3.2: one :status, before the regular fields, and no
     * other pseudo-header field; none in trailers (§8.1). 101 does not
     * apply to HTTP/2 (§8.6). */
    if (st->r.final || st->regular_seen || st->status_seen || !FIELD_IS(name, namelen, ":status"))
        return CAUSE_H2_PROTOCOL;
    st->status_seen = true;
    st->r.status = status_of(value, valuelen);
    st->length = -1;
    return st->r.status && st->r.status != 101 ? CAUSE_COUNT : CAUSE_H2_PROTOCOL;
}

/* A HEADERS frame begins: the first of a stream's is its response's first
 * byte (an interim response's when one comes first), at the time of the
 * read that brought it. */
static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user_data)
{
    (void)ng;
    struct h2 *s = user_data;
    struct h2_stream *st = stream_of(s, frame->hd.stream_id);
    if (st && !st->r.first_at)
        st->r.first_at = s->now;
    return 0;
}

/* The fields as nghttp2 holds them, which says which names come from
 * HPACK's static table. */
static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name_buf,
                     nghttp2_rcbuf *value_buf, uint8_t flags, void *user_data)
{
    (void)ng, (void)flags;
    struct h2 *s = user_data;
    int32_t id = frame->hd.stream_id;
    struct h2_stream *st = stream_of(s, id);
    if (!st || st->r.ended || s->mux.stopped)
        return 0;
    nghttp2_vec n = nghttp2_rcbuf_get_buf(name_buf), v = nghttp2_rcbuf_get_buf(value_buf);
    const uint8_t *name = n.base, *value = v.base;
    size_t namelen = n.len, valuelen = v.len;
    enum cause why =
        check_field(st, name, namelen, value, valuelen, nghttp2_rcbuf_is_static(name_buf));
    if (why != CAUSE_COUNT) {
        malformed(s, st, id, why, frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
        return 0;
    }
    /* The hook gets the final head's regular fields as lines: a field that
     * would not be one line is left out. */
    if (s->conf->wants->head && !st->r.final && name[0] != ':' &&
        nghttp2_check_header_name(name, namelen) && nghttp2_check_header_value(value, valuelen)) {
        buf_append(&st->r.fields, name, namelen);
        buf_append(&st->r.fields, ": ", 2);
        buf_append(&st->r.fields, value, valuelen);
        buf_append(&st->r.fields, "\r\n", 2);
    }
    return 0;
}

/* Response content: only after the final head, and as long as its
 * content-length says, or none at all for a response that has none (RFC
 * 9113 §8.1.1). The hook gets at most HTTP_MAX_BODY of it, as over
 * HTTP/1.1. */
static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user_data)
{
    (void)ng;
    struct h2 *s = user_data;
    struct h2_stream *st = stream_of(s, id);
    if (!st || st->r.ended || s->mux.stopped)
        return 0;
    bool ended = flags & NGHTTP2_FLAG_END_STREAM;
    st->received += len;
    if (!st->r.final) {
        malformed(s, st, id, CAUSE_H2_PROTOCOL, ended);
    } else if ((len && bodiless(st)) || (st->length >= 0 && st->received > (uint64_t)st->length)) {
        malformed(s, st, id, CAUSE_UNEXPECTED, ended);
    } else if (s->conf->wants->body && st->r.body.len < HTTP_MAX_BODY) {
        size_t room = HTTP_MAX_BODY - st->r.body.len;
        buf_append(&st->r.body, data, len < room ? len : room);
    }
    return 0;
}

/* The server's SETTINGS: how many streams a connection may have open. */
static void on_settings(struct h2 *s)
{
    struct stats *stats = s->conf->stats;
    uint32_t most =
        nghttp2_session_get_remote_settings(s->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    s->limit = most < s->conf->streams ? most : s->conf->streams;
    /* the fewest any connection was allowed (UINT64_MAX before any) */
    if (s->limit < stats->h2_streams)
        stats->h2_streams = s->limit;
    stats->h2_settings++;
}

static void on_goaway(struct h2 *s, const nghttp2_goaway *g)
{
    s->conf->stats->h2_goaways++;
    s->draining = true;
    /* nghttp2 will start no stream now: those whose HEADERS have not gone
     * out never will. Those above last_stream_id it closes with
     * REFUSED_STREAM right after this; those below may still be answered. */
    for (struct mux_req *r = s->mux.head, *next; r; r = next) {
        struct h2_stream *st = stream(r);
        next = r->next;
        if (!st->r.sent_at)
            refused(s, st);
    }
    if (g->error_code != NGHTTP2_NO_ERROR)
        fail(s, CAUSE_GOAWAY);
}

/* A header block ended: an interim head, the final head, or trailers
 * (which must end the stream, RFC 9113 §8.1). */
static void end_of_block(struct h2 *s, struct h2_stream *st, int32_t id, bool ended)
{
    bool status = st->status_seen;
    st->status_seen = st->regular_seen = false;
    if (st->r.final) {
        if (!ended)
            malformed(s, st, id, CAUSE_H2_PROTOCOL, ended);
    } else if (!status || (st->r.status < 200 && ended)) {
        malformed(s, st, id, CAUSE_H2_PROTOCOL, ended);
    } else if (st->r.status >= 200) {
        st->r.final = true; /* trailers after it are not the hook's */
    } else {
        /* A 1xx interim head: the final one starts afresh. */
        buf_clear(&st->r.fields);
    }
}

/* The server ended the stream: a complete response, unless it had no
 * final head or its content fell short of its content-length. */
static void end_of_stream(struct h2 *s, struct h2_stream *st)
{
    if (!st->r.final)
        mux_failed(&s->mux, &st->r, CAUSE_H2_PROTOCOL);
    else if (st->length >= 0 && !bodiless(st) && st->received < (uint64_t)st->length)
        mux_failed(&s->mux, &st->r, CAUSE_TRUNCATED);
    else
        mux_answered(&s->mux, &st->r, s->now);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *user_data)
{
    (void)ng;
    struct h2 *s = user_data;
    struct h2_stream *st;
    if (s->mux.stopped)
        return 0;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        st = stream_of(s, frame->hd.stream_id);
        if (st && !st->r.ended && frame->hd.type == NGHTTP2_HEADERS)
            end_of_block(s, st, frame->hd.stream_id, frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
        if (st && !st->r.ended && frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
            end_of_stream(s, st);
        break;
    case NGHTTP2_SETTINGS:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK)
            s->settings_at = 0;
        else
            on_settings(s);
        break;
    case NGHTTP2_RST_STREAM: {
        uint32_t code = frame->rst_stream.error_code;
        s->conf->stats->h2_resets[code < STATS_H2_CODES ? code : STATS_H2_CODES - 1]++;
        if ((st = stream_of(s, frame->hd.stream_id)) != NULL)
            st->r.reset = true;
        break;
    }
    case NGHTTP2_GOAWAY:
        on_goaway(s, &frame->goaway);
        break;
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user_data)
{
    (void)ng;
    struct h2 *s = user_data;
    struct h2_stream *st = stream_of(s, id);
    if (!st)
        return 0;
    if (!st->r.ended && !s->mux.stopped) {
        if (code == NGHTTP2_REFUSED_STREAM)
            refused(s, st);
        else if (st->r.reset)
            mux_failed(&s->mux, &st->r, CAUSE_STREAM_RESET);
        else /* nghttp2 reset it: the response broke the protocol */
            mux_failed(&s->mux, &st->r, CAUSE_H2_PROTOCOL);
    }
    if (!st->r.ended) /* stopping: the connection hands it back */
        return 0;
    stream_put(s, st);
    return 0;
}

/* nghttp2 would not send a request's HEADERS. Over its limit on a header
 * block (a request() returned one too large: the static request was checked
 * at start-up), the request fails unsent; sending it again would fail
 * again. For other reasons (a GOAWAY came first) nghttp2 closes the stream
 * as refused. */
static int on_frame_not_send(nghttp2_session *ng, const nghttp2_frame *frame, int error,
                             void *user_data)
{
    (void)ng;
    struct h2 *s = user_data;
    struct h2_stream *st;
    if (frame->hd.type != NGHTTP2_HEADERS || error != NGHTTP2_ERR_FRAME_SIZE_ERROR ||
        s->mux.stopped || !(st = stream_of(s, frame->hd.stream_id)) || st->r.ended)
        return 0;
    mux_unsent(&s->mux, &st->r, CAUSE_REQUEST_TOO_LARGE);
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *user_data)
{
    (void)ng;
    struct h2 *s = user_data;
    struct h2_stream *st;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
        (st = stream_of(s, frame->hd.stream_id)) != NULL)
        st->r.sent_at = s->now;
    else if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR)
        fail(s, goaway_cause(frame->goaway.error_code)); /* nghttp2 ended it */
    return 0;
}

/* A request body: nghttp2 asks how much goes in the next DATA frame, then
 * send_body writes the frame straight from the request's bytes. */
static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    (void)ng, (void)id, (void)buf, (void)user_data;
    struct h2_stream *st = source->ptr;
    size_t n = st->r.msg->body_len - st->body_off;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (n <= length)
        *flags |= NGHTTP2_DATA_FLAG_EOF; /* the rest fits in this frame */
    else
        n = length;
    st->body_off += n;
    return (ssize_t)n;
}

static int send_body(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                     size_t length, nghttp2_data_source *source, void *user_data)
{
    (void)ng, (void)frame;
    struct h2 *s = (struct h2 *)user_data;
    struct h2_stream *st = source->ptr;
    /* Past the size of one write, nghttp2 offers the frame again later. */
    if (s->out.len && s->out.len + 9 + length > H2_OUT_MAX)
        return NGHTTP2_ERR_WOULDBLOCK;
    buf_append(&s->out, framehd, 9);
    buf_append(&s->out, st->r.msg->body + st->body_off - length, length);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The operations                                                             */
/* ------------------------------------------------------------------------ */

static struct proto_session *h2_create(const struct proto_conf *conf, const struct proto_sink *sink,
                                       void *arg)
{
    struct h2 *s = xcalloc(1, sizeof *s);
    s->conf = conf;
    mux_init(&s->mux, sink, arg, sizeof(struct h2_stream), sizeof(struct mux_batch));
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&s->option) != 0)
        die("out of memory");
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback2(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, on_frame_not_send);
    nghttp2_session_callbacks_set_send_data_callback(cb, send_body);
    s->callbacks = cb;
    /* Closed streams are not kept for a priority tree volley never uses. */
    nghttp2_option_set_no_closed_streams(s->option, 1);
    nghttp2_option_set_no_http_messaging(s->option, 1);
    nghttp2_option_set_max_send_header_block_length(s->option, H2REQ_BLOCK_MAX);
    /* nghttp2's allocator: the session's pool. */
    s->mem =
        (nghttp2_mem){&s->pool, pool_mem_malloc, pool_mem_free, pool_mem_calloc, pool_mem_realloc};
    return (struct proto_session *)(void *)s;
}

static void h2_destroy(struct proto_session *session)
{
    struct h2 *s = (struct h2 *)(void *)session;
    if (s->ng)
        nghttp2_session_del(s->ng);
    mux_free(&s->mux, NULL);
    h2req_static_free(&s->static_copy);
    buf_free(&s->out);
    nghttp2_session_callbacks_del(s->callbacks);
    nghttp2_option_del(s->option);
    pool_clear(&s->pool);
    free(s);
}

static void h2_open(struct proto_session *session, struct sock *sock)
{
    (void)sock;
    struct h2 *s = (struct h2 *)(void *)session;
    static const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_WINDOW},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, HTTP_MAX_HEAD},
    };
    if (nghttp2_session_client_new3(&s->ng, s->callbacks, s, s->option, &s->mem) != 0 ||
        nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, settings,
                                sizeof settings / sizeof settings[0]) != 0 ||
        nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0, H2_WINDOW) != 0)
        die("out of memory");
    s->settings_at = clock_us();
    s->last_id = 0;
    s->limit = s->conf->streams;
    s->batches = 0;
    s->draining = s->failed = s->mux.stopped = false;
}

static bool h2_ready(const struct proto_session *session)
{
    const struct h2 *s = (const struct h2 *)(const void *)session;
    if (!s->ng || s->draining || s->failed || (s->conf->no_keepalive && s->batches))
        return false;
    return mux_room(&s->mux, s->conf->depth, s->limit);
}

static void h2_submit(struct proto_session *session, const struct request *r, bool own, size_t n,
                      uint64_t now, uint64_t start_at)
{
    struct h2 *s = (struct h2 *)(void *)session;
    struct mux_batch *b = own ? mux_batch(&s->mux) : NULL;
    /* request()'s copy is converted again only when its bytes differ (most
     * scripts return the same few requests). */
    if (b)
        h2req_batch_set(&b->copy, r, s->conf->tls, "HTTP/2");
    const struct h2req *conv =
        b ? &b->copy.conv : h2req_static(&s->static_copy, r, s->conf->tls, "HTTP/2");
    s->batches++;
    for (size_t i = 0; i < n; i++) {
        struct h2_stream *st = stream(mux_add(&s->mux, b, &conv->msgs[i], now, start_at));
        st->body_off = 0;
        st->head = st->received = 0;
        st->length = -1;
        st->status_seen = st->regular_seen = false;
        nghttp2_data_provider body = {.source.ptr = st, .read_callback = read_body};
        int32_t id = nghttp2_submit_request(s->ng, NULL, st->r.msg->nv, st->r.msg->nvlen,
                                            st->r.msg->body_len ? &body : NULL, st);
        /* h2req checked the fields, and the ids are watched below. */
        if (id < 0)
            die("HTTP/2: cannot submit a request: %s", nghttp2_strerror(id));
    }
    if ((uint64_t)nghttp2_session_get_next_stream_id(s->ng) + 2 * s->conf->depth > H2_LAST_ID)
        s->draining = true;
}

/* Serialize what nghttp2 has to send into the output buffer, up to the size
 * of one write, unless that buffer is already handed to a write. */
static void fill(struct h2 *s)
{
    if (!s->ng || s->offered)
        return;
    s->now = clock_us(); /* when the HEADERS frames serialized now go out */
    while (s->out.len < H2_OUT_MAX) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(s->ng, &data);
        if (n < 0)
            fail(s, CAUSE_H2_PROTOCOL);
        if (n <= 0)
            break;
        buf_append(&s->out, data, (size_t)n);
    }
}

static size_t h2_output(struct proto_session *session, const char **data)
{
    struct h2 *s = (struct h2 *)(void *)session;
    fill(s);
    if (s->out_off == s->out.len)
        return 0;
    s->offered = true;
    *data = s->out.data + s->out_off;
    return s->out.len - s->out_off;
}

static void h2_wrote(struct proto_session *session, size_t n)
{
    struct h2 *s = (struct h2 *)(void *)session;
    s->out_off += n;
    if (s->out_off == s->out.len) {
        s->out.len = s->out_off = 0;
        s->offered = false;
    }
}

/* After input: whether the connection goes on. */
static enum proto_status verdict(struct h2 *s, enum cause *cause)
{
    if (s->failed) {
        *cause = s->why;
        return PROTO_FAIL;
    }
    /* Done with: after a GOAWAY, near the end of the stream ids, or with
     * --no-keepalive after its batch. */
    if (s->mux.inflight == 0 && (s->draining || (s->conf->no_keepalive && s->batches)))
        return PROTO_CLOSE;
    return PROTO_OK;
}

static enum proto_status h2_input(struct proto_session *session, const char *buf, size_t len,
                                  uint64_t now, enum cause *cause)
{
    struct h2 *s = (struct h2 *)(void *)session;
    s->now = now;
    ssize_t rv = nghttp2_session_mem_recv(s->ng, (const uint8_t *)buf, len);
    if (s->mux.stopped)
        return PROTO_OK;
    if (rv < 0)
        fail(s, rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS
                    ? CAUSE_H2_FLOOD
                    : CAUSE_H2_PROTOCOL);
    /* Serialize the replies now (the connection writes them next, with
     * any new requests): an error nghttp2 found in what came shows as the
     * GOAWAY it queued. */
    fill(s);
    return verdict(s, cause);
}

static enum proto_status h2_eof(struct proto_session *session, uint64_t now, enum cause *cause)
{
    struct h2 *s = (struct h2 *)(void *)session;
    (void)now;
    if (s->failed) {
        *cause = s->why;
        return PROTO_FAIL;
    }
    if (s->mux.inflight == 0) /* an idle connection, or one that drained */
        return PROTO_CLOSE;
    *cause = CAUSE_CLOSED;
    return PROTO_FAIL;
}

static size_t h2_inflight(const struct proto_session *session)
{
    const struct h2 *s = (const struct h2 *)(const void *)session;
    return s->mux.inflight;
}

static uint64_t h2_oldest(const struct proto_session *session)
{
    const struct h2 *s = (const struct h2 *)(const void *)session;
    uint64_t t = s->mux.head ? s->mux.head->queued_at : 0;
    if (s->settings_at && (!t || s->settings_at < t))
        t = s->settings_at;
    return t;
}

static enum cause h2_expired(const struct proto_session *session)
{
    const struct h2 *s = (const struct h2 *)(const void *)session;
    const struct h2_stream *st = stream(s->mux.head);
    if (s->settings_at && (!st || s->settings_at <= st->r.queued_at))
        return CAUSE_SETTINGS_TIMEOUT;
    if (st && !st->r.sent_at) /* the oldest never got a stream */
        return CAUSE_STREAM_LIMIT;
    if (st && st->body_off < st->r.msg->body_len) /* its body waits for a window */
        return CAUSE_FLOW_CONTROL;
    return CAUSE_RESPONSE_TIMEOUT;
}

/* The connection is going: every record goes back, whatever its state
 * (nghttp2_session_del calls no callback). */
static void h2_abort(struct proto_session *session)
{
    struct h2 *s = (struct h2 *)(void *)session;
    if (s->ng) {
        nghttp2_session_del(s->ng);
        s->ng = NULL;
    }
    mux_abort(&s->mux);
    s->last_id = 0;
    s->out.len = s->out_off = 0;
    s->offered = false;
    s->settings_at = 0;
}

const struct proto_ops proto_h2 = {
    .name = "HTTP/2",
    .alpn = "h2",
    .figures = STATS_AT_HTTP2,
    .multiplexed = true,
    .check = h2_check_request,
    .probe = h2_probe,
    .create = h2_create,
    .destroy = h2_destroy,
    .open = h2_open,
    .ready = h2_ready,
    .submit = h2_submit,
    .output = h2_output,
    .wrote = h2_wrote,
    .input = h2_input,
    .eof = h2_eof,
    .inflight = h2_inflight,
    .oldest = h2_oldest,
    .expired = h2_expired,
    .abort = h2_abort,
};
