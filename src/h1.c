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

#include "conn.h"
#include "http.h"
#include "proto.h"
#include "request.h"
#include "xalloc.h"

struct h1 {
    struct http_parser parser;
    const struct request *batch; /* in flight, or NULL when idle */
    size_t len;                  /* bytes of batch to write */
    size_t written;              /* of which written (the request side) */
    size_t depth;                /* requests in those bytes */
    size_t pending;              /* responses still expected (the response side) */
    uint64_t sent_at;            /* when the batch's first byte went out */
    uint64_t start_at;           /* where its latency counts from */
    struct proto_response view;  /* the response just parsed, as conn_response takes it */
};

static void *h1_new(struct conn *c)
{
    struct h1 *s = xcalloc(1, sizeof *s);
    http_parser_init(&s->parser);
    s->parser.cache = c->env->head_cache;
    return s;
}

static void h1_free(void *session)
{
    struct h1 *s = session;
    http_parser_free(&s->parser);
    free(s);
}

static void h1_open(struct conn *c)
{
    struct h1 *s = c->session;
    s->batch = NULL;
    s->pending = 0;
    s->parser.want_head = c->env->want_head;
    s->parser.want_body = c->env->want_body;
    http_begin(&s->parser, false);
}

static bool h1_ready(const struct conn *c)
{
    const struct h1 *s = c->session;
    return !s->batch;
}

static void h1_submit(struct conn *c, const struct request *r, size_t n, uint64_t now,
                      uint64_t start_at)
{
    struct h1 *s = c->session;
    s->batch = r;
    s->depth = s->pending = n;
    s->len = request_prefix(r, n);
    s->written = 0;
    s->sent_at = now;
    s->start_at = start_at ? start_at : now;
    s->parser.want_head = c->env->want_head;
    s->parser.want_body = c->env->want_body;
    http_begin(&s->parser, request_is_head(r, 0));
}

static size_t h1_output(struct conn *c, const char **data)
{
    struct h1 *s = c->session;
    if (!s->batch || s->written == s->len)
        return 0;
    *data = s->batch->data + s->written;
    return s->len - s->written;
}

static void h1_wrote(struct conn *c, size_t n)
{
    struct h1 *s = c->session;
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

/* A final response completed. */
static enum proto_status response_done(struct conn *c, uint64_t now)
{
    struct h1 *s = c->session;
    s->pending--;
    s->view.status = s->parser.status;
    if (c->env->response)
        hook_view(&s->parser, &s->view);
    if (!conn_response(c, &s->view, s->start_at, s->sent_at, now))
        return PROTO_OK;
    if (!s->parser.keep_alive || (c->env->no_keepalive && s->pending == 0)) {
        /* Requests pipelined behind a closing response were never read by
         * the server; the rest of a request it answered early is not sent
         * either (RFC 9112 §9.5: cease transmitting the body and close). */
        conn_requests_returned(c, s->pending);
        s->pending = 0;
        s->batch = NULL;
        return PROTO_CLOSE;
    }
    if (s->pending)
        http_begin(&s->parser, request_is_head(s->batch, s->depth - s->pending));
    else if (s->written == s->len)
        s->batch = NULL;
    /* Otherwise the server answered before the whole request was written and
     * keeps the connection: it reads and discards the rest of the body, so
     * the rest is written before anything else goes out on it. */
    return PROTO_OK;
}

static enum proto_status h1_input(struct conn *c, const char *buf, size_t len, uint64_t now,
                                  enum cause *cause)
{
    struct h1 *s = c->session;
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
        size_t used;
        enum http_result r = http_parse(&s->parser, buf + off, len - off, &used);
        off += used;
        if (r == HTTP_MORE)
            break;
        if (r == HTTP_ERROR) {
            *cause = parse_cause(&s->parser);
            return PROTO_FAIL;
        }
        enum proto_status st = response_done(c, now);
        if (st != PROTO_OK || c->env->stopping)
            return st;
    }
    return PROTO_OK;
}

static enum proto_status h1_eof(struct conn *c, uint64_t now, enum cause *cause)
{
    struct h1 *s = c->session;
    switch (http_eof(&s->parser)) {
    case HTTP_DONE: /* a body delimited by the close: a complete response */
        response_done(c, now);
        s->batch = NULL;
        return PROTO_CLOSE;
    case HTTP_MORE:
        if (s->pending) {
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

static size_t h1_inflight(const struct conn *c)
{
    const struct h1 *s = c->session;
    return s->pending;
}

static uint64_t h1_oldest(const struct conn *c)
{
    const struct h1 *s = c->session;
    return s->batch ? s->sent_at : 0;
}

static enum cause h1_expired(const struct conn *c)
{
    (void)c;
    return CAUSE_RESPONSE_TIMEOUT;
}

static void h1_abort(struct conn *c)
{
    struct h1 *s = c->session;
    s->batch = NULL;
    s->pending = 0;
}

const struct proto_ops proto_h1 = {
    .name = "HTTP/1.1",
    .new = h1_new,
    .free = h1_free,
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
