/* The HTTP/1.1 session: one batch of requests in flight at a time (one
 * request, or several pipelined ones), written straight from the request's
 * bytes (no copy), and its responses framed by http.c. The request side
 * (bytes written) and the response side (responses still expected) are
 * tracked apart, as h2o's and curl's clients do: the next batch goes out
 * only when both are done, so a response that arrives before its request is
 * fully written never lets the next request into the rest of that body.
 * SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "h1.h"
#include "http.h"
#include "http_request.h"
#include "proto.h"
#include "request.h"
#include "xalloc.h"

struct h1 {
    const struct proto_conf *conf;
    const struct proto_sink *sink; /* where its requests end, with arg */
    void *arg;
    struct http_parser parser;
    const struct request *batch; /* in flight, or NULL when idle */
    size_t len;                  /* bytes of batch to write */
    size_t written;              /* of which written (the request side) */
    size_t depth;                /* requests in those bytes */
    size_t pending;              /* responses still expected (the response side) */
    uint64_t sent_at;            /* when the batch's first byte went out */
    uint64_t start_at;           /* where its latency counts from */
    uint64_t first_at;           /* when the current response's first byte came, or 0 */
    bool answered;               /* a response completed since the connection opened */
};

static struct proto_session *h1_create(const struct proto_conf *conf, const struct proto_sink *sink,
                                       void *arg)
{
    struct h1 *s = xcalloc(1, sizeof *s);
    s->conf = conf;
    s->sink = sink;
    s->arg = arg;
    http_parser_init(&s->parser);
    s->parser.cache = conf->head_cache;
    return (struct proto_session *)(void *)s;
}

static void h1_destroy(struct proto_session *session)
{
    struct h1 *s = (struct h1 *)(void *)session;
    http_parser_free(&s->parser);
    free(s);
}

/* What the response() hook takes of the responses to come. */
static void wants(struct h1 *s)
{
    s->parser.want_head = s->conf->wants->head;
    s->parser.want_body = s->conf->wants->body;
}

static void h1_open(struct proto_session *session, struct sock *sock)
{
    (void)sock;
    struct h1 *s = (struct h1 *)(void *)session;
    s->batch = NULL;
    s->pending = 0;
    s->first_at = 0;
    s->answered = false;
    wants(s);
    http_begin(&s->parser, false);
}

static bool h1_ready(const struct proto_session *session)
{
    const struct h1 *s = (struct h1 *)(void *)session;
    return !s->batch;
}

static void h1_submit(struct proto_session *session, const struct request *r, bool own, size_t n,
                      uint64_t now, uint64_t start_at)
{
    (void)own; /* written before the next batch refills it */
    struct h1 *s = (struct h1 *)(void *)session;
    s->batch = r;
    s->depth = s->pending = n;
    s->len = request_prefix(r, n);
    s->written = 0;
    s->sent_at = now;
    s->start_at = start_at ? start_at : now;
    s->first_at = 0;
    wants(s);
    http_begin(&s->parser, request_is_head(r, 0));
}

static size_t h1_output(struct proto_session *session, const char **data)
{
    struct h1 *s = (struct h1 *)(void *)session;
    if (!s->batch || s->written == s->len)
        return 0;
    *data = s->batch->data + s->written;
    return s->len - s->written;
}

static void h1_wrote(struct proto_session *session, size_t n)
{
    struct h1 *s = (struct h1 *)(void *)session;
    s->written += n;
    /* Every response came before the last of the request was written (the
     * server answered early and read the rest): now both sides are done. */
    if (s->written == s->len && s->pending == 0)
        s->batch = NULL;
}

static enum cause parse_cause(const struct http_parser *p)
{
    switch (p->error) {
    case HTTP_ERR_HEAD_TOO_LARGE:
        return CAUSE_HEAD_TOO_LARGE;
    case HTTP_ERR_TRUNCATED:
        return CAUSE_TRUNCATED;
    default:
        return CAUSE_PARSE;
    }
}

/* What the response() hook takes of the response just parsed: the field
 * lines of its head (after the status line) and its body. */
static void hook_view(const struct http_parser *p, struct proto_response *r)
{
    http_head_fields(&p->head, &r->fields, &r->fields_len);
    r->body = p->body.data;
    r->body_len = p->body.len;
}

/* A final response completed. Returns false when the run is over for the
 * connection (*st then PROTO_OK). */
static bool response_done(struct h1 *s, uint64_t now, enum proto_status *st)
{
    struct proto_response view = {.status = s->parser.status,
                                  .start_at = s->start_at,
                                  .sent_at = s->sent_at,
                                  .first_at = s->first_at,
                                  .done_at = now};
    s->pending--;
    s->first_at = 0; /* the next response's is to come */
    s->answered = true;
    if (s->parser.want_head || s->parser.want_body)
        hook_view(&s->parser, &view);
    *st = PROTO_OK;
    if (!s->sink->response(s->arg, &view))
        return false;
    if (!s->parser.keep_alive || (s->conf->no_keepalive && s->pending == 0)) {
        /* Requests pipelined behind a closing response were never read by
         * the server; the rest of a request it answered early is not sent
         * either (RFC 9112 §9.5: cease transmitting the body and close). */
        if (s->pending)
            s->sink->returned(s->arg, s->pending);
        s->pending = 0;
        s->batch = NULL;
        *st = PROTO_CLOSE;
        return true;
    }
    if (s->pending)
        http_begin(&s->parser, request_is_head(s->batch, s->depth - s->pending));
    else if (s->written == s->len)
        s->batch = NULL;
    /* Otherwise the server answered before the whole request was written and
     * keeps the connection: it reads and discards the rest of the body, so
     * the rest is written before anything else goes out on it. */
    return true;
}

static enum proto_status h1_input(struct proto_session *session, const char *buf, size_t len,
                                  uint64_t now, enum cause *cause)
{
    struct h1 *s = (struct h1 *)(void *)session;
    size_t off = 0;
    while (off < len) {
        if (s->pending == 0) {
            /* A stray CRLF after a body is skipped, as before a status line
             * (RFC 9112 §2.2); other bytes nobody asked for cannot answer a
             * later request. */
            while (off < len && (buf[off] == '\r' || buf[off] == '\n'))
                off++;
            if (off == len)
                break;
            *cause = CAUSE_UNEXPECTED;
            return PROTO_FAIL;
        }
        /* the time to first byte: of the read that brought it */
        if (!s->first_at)
            s->first_at = now;
        size_t used;
        enum http_result r = http_parse(&s->parser, buf + off, len - off, &used);
        off += used;
        if (r == HTTP_MORE)
            break;
        if (r == HTTP_ERROR) {
            *cause = parse_cause(&s->parser);
            return PROTO_FAIL;
        }
        enum proto_status st;
        if (!response_done(s, now, &st) || st != PROTO_OK)
            return st;
    }
    return PROTO_OK;
}

/* Whether the batch's requests from the nth on all have idempotent
 * methods (RFC 9110 §9.2.2), which a client may send again by itself. */
static bool idempotent(const struct request *r, size_t n)
{
    static const char *const methods[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"};
    struct http_request_info info;
    size_t pos = 0;
    for (size_t i = 0; http_request_next(r->data, r->len, &pos, &info); i++) {
        bool ok = false;
        for (size_t k = 0; k < sizeof methods / sizeof methods[0] && !ok; k++)
            ok = info.method_len == strlen(methods[k]) &&
                 memcmp(info.method, methods[k], info.method_len) == 0;
        if (i >= n && !ok)
            return false;
    }
    return true;
}

/* The connection ended with requests unanswered and not a byte of their
 * responses come: through a proxy that keeps no connection, they go again. */
static bool resent(struct h1 *s)
{
    if (!s->conf->resend_unanswered || !s->answered || s->first_at ||
        !idempotent(s->batch, s->depth - s->pending))
        return false;
    s->sink->returned(s->arg, s->pending);
    s->pending = 0;
    s->batch = NULL;
    return true;
}

static enum proto_status h1_eof(struct proto_session *session, uint64_t now, enum cause *cause)
{
    struct h1 *s = (struct h1 *)(void *)session;
    enum proto_status st;
    switch (http_eof(&s->parser)) {
    case HTTP_DONE: /* a body delimited by the close: a complete response */
        response_done(s, now, &st);
        s->batch = NULL;
        return PROTO_CLOSE;
    case HTTP_MORE:
        if (s->pending && !resent(s)) {
            *cause = CAUSE_CLOSED;
            return PROTO_FAIL;
        }
        s->batch = NULL; /* an idle keep-alive connection, or one closed early */
        return PROTO_CLOSE;
    default:
        *cause = parse_cause(&s->parser);
        return PROTO_FAIL;
    }
}

static size_t h1_inflight(const struct proto_session *session)
{
    const struct h1 *s = (struct h1 *)(void *)session;
    return s->pending;
}

static uint64_t h1_oldest(const struct proto_session *session)
{
    const struct h1 *s = (struct h1 *)(void *)session;
    return s->batch ? s->sent_at : 0;
}

static enum cause h1_expired(const struct proto_session *session)
{
    (void)session;
    return CAUSE_RESPONSE_TIMEOUT;
}

static void h1_abort(struct proto_session *session)
{
    struct h1 *s = (struct h1 *)(void *)session;
    s->batch = NULL;
    s->pending = 0;
}

const struct proto_ops proto_h1 = {
    .name = "HTTP/1.1",
    .alpn = "http/1.1",
    .figures = STATS_AT_NONE,
    .create = h1_create,
    .destroy = h1_destroy,
    .open = h1_open,
    .ready = h1_ready,
    .submit = h1_submit,
    .output = h1_output,
    .wrote = h1_wrote,
    .input = h1_input,
    .eof = h1_eof,
    .inflight = h1_inflight,
    .oldest = h1_oldest,
    .expired = h1_expired,
    .abort = h1_abort,
};
