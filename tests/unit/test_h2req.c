/* Unit tests for src/h2req.c: a table of HTTP/1.1 request strings with the
 * HTTP/2 header lists and bodies they must become (or the error they must
 * get), each accepted one also sent through a real nghttp2 client session
 * into an nghttp2 server session, which applies RFC 9113's rules to what it
 * receives and must see the same fields and body; then what is copied and
 * what points into the request bytes, and reuse of one h2req.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include "buf.h"
#include "h2req.h"
#include "request.h"
#include "xalloc.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static bool build(struct request *r, struct h2req *h, const char *text, bool tls, char *err,
                  size_t err_len)
{
    char parse_err[128];
    if (!request_set(r, xstrdup(text), strlen(text), parse_err, sizeof parse_err)) {
        UNIT_FAIL("request_set refused the test input: %s", parse_err);
        return false;
    }
    return h2req_build(h, r, tls, err, err_len);
}

static void render_nv(struct buf *b, const nghttp2_nv *nv)
{
    buf_append(b, nv->name, nv->namelen);
    buf_append(b, ": ", 2);
    buf_append(b, nv->value, nv->valuelen);
    buf_append(b, "\n", 1);
}

/* "name: value" lines, "body: ..." and "head" when they apply, "--" between
 * messages; NUL-terminated. */
static void render(struct buf *b, const struct h2req *h)
{
    buf_clear(b);
    for (size_t i = 0; i < h->count; i++) {
        const struct h2req_msg *m = &h->msgs[i];
        if (i)
            buf_append(b, "--\n", 3);
        for (size_t k = 0; k < m->nvlen; k++)
            render_nv(b, &m->nv[k]);
        if (m->body_len) {
            buf_append(b, "body: ", 6);
            buf_append(b, m->body, m->body_len);
            buf_append(b, "\n", 1);
        }
        if (m->head)
            buf_append(b, "head\n", 5);
    }
    buf_append(b, "", 1);
}

/* ------------------------------------------------------------------------ */
/* An nghttp2 client session submits a message; a server session receives   */
/* ------------------------------------------------------------------------ */

struct seen {
    struct buf fields, body;
    bool complete;     /* END_STREAM arrived on a request the server accepted */
    uint32_t rst_code; /* the error the stream was closed with */
};

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    (void)s, (void)f, (void)flags;
    struct seen *seen = user;
    render_nv(&seen->fields,
              &(nghttp2_nv){(uint8_t *)name, (uint8_t *)value, namelen, valuelen, 0});
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
    (void)s, (void)flags, (void)id;
    buf_append(&((struct seen *)user)->body, data, len);
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    (void)s;
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        ((struct seen *)user)->complete = true;
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
    (void)s, (void)id;
    ((struct seen *)user)->rst_code = code;
    return 0;
}

struct body_src {
    const char *data;
    size_t len, off;
};

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *user)
{
    (void)s, (void)id, (void)user;
    struct body_src *b = src->ptr;
    size_t n = b->len - b->off < len ? b->len - b->off : len;
    memcpy(buf, b->data + b->off, n);
    b->off += n;
    if (b->off == b->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* Moves everything from's session wants to send into to's. */
static bool pump(nghttp2_session *from, nghttp2_session *to)
{
    const uint8_t *out;
    bool any = false;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(from, &out)) > 0) {
        any = true;
        if (nghttp2_session_mem_recv(to, out, (size_t)n) != n)
            UNIT_FAIL("mem_recv did not take %zd bytes", n);
    }
    if (n < 0)
        UNIT_FAIL("mem_send: %s", nghttp2_strerror((int)n));
    return any;
}

static void deliver(const struct h2req_msg *m, struct seen *seen)
{
    nghttp2_session_callbacks *cb;
    nghttp2_session *client, *server;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_client_new(&client, cb, NULL);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_server_new(&server, cb, seen);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(client, NGHTTP2_FLAG_NONE, NULL, 0);
    nghttp2_submit_settings(server, NGHTTP2_FLAG_NONE, NULL, 0);

    struct body_src src = {m->body, m->body_len, 0};
    nghttp2_data_provider prd = {.source.ptr = &src, .read_callback = read_body};
    int32_t id =
        nghttp2_submit_request(client, NULL, m->nv, m->nvlen, m->body_len ? &prd : NULL, NULL);
    if (id < 0)
        UNIT_FAIL("submit_request: %s", nghttp2_strerror(id));
    for (int round = 0; round < 100; round++)
        if (!pump(client, server) && !pump(server, client))
            break;
    nghttp2_session_del(client);
    nghttp2_session_del(server);
}

/* What the server session saw of each message equals what h2req built. */
static void check_delivery(const struct h2req *h)
{
    struct buf want = {0};
    for (size_t i = 0; i < h->count; i++) {
        const struct h2req_msg *m = &h->msgs[i];
        struct seen seen = {0};
        deliver(m, &seen);
        buf_clear(&want);
        for (size_t k = 0; k < m->nvlen; k++)
            render_nv(&want, &m->nv[k]);
        buf_append(&want, "", 1);
        buf_append(&seen.fields, "", 1);
        CHECK(seen.complete);
        CHECK_U64(seen.rst_code, NGHTTP2_NO_ERROR);
        CHECK_STR(seen.fields.data, want.data);
        CHECK_U64(seen.body.len, m->body_len);
        CHECK(m->body_len == 0 || memcmp(seen.body.data, m->body, m->body_len) == 0);
        buf_free(&seen.fields);
        buf_free(&seen.body);
    }
    buf_free(&want);
}

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

#define H1(line, fields) line " HTTP/1.1\r\n" fields "\r\n"
#define HOST "Host: localhost:8080\r\n"
#define PSEUDO(method, path)                                                                       \
    ":method: " method "\n:scheme: http\n:authority: localhost:8080\n"                             \
    ":path: " path "\n"

struct conversion {
    const char *name, *in;
    bool tls;
    const char *out; /* render()'s text, or NULL when refused */
    const char *err; /* the error when refused */
};

static const struct conversion conversions[] = {
    {"wrk.format's GET", H1("GET /", HOST), false, PSEUDO("GET", "/"), NULL},
    {"https scheme", H1("GET /x?y=1", "Host: example.com\r\n"), true,
     ":method: GET\n:scheme: https\n:authority: example.com\n:path: /x?y=1\n", NULL},
    {"names lower-cased, order and values kept",
     H1("GET /", "User-Agent: volley\r\n" HOST "ACCEPT: */*\r\nx-Mixed-Case: A b  C\r\n"
                 "X-Empty:\r\n"),
     false, PSEUDO("GET", "/") "user-agent: volley\naccept: */*\nx-mixed-case: A b  C\nx-empty: \n",
     NULL},
    {"connection-specific fields dropped",
     H1("GET /", HOST "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
                      "Proxy-Connection: keep-alive\r\nUpgrade: h2c\r\nX-Kept: 1\r\n"),
     false, PSEUDO("GET", "/") "x-kept: 1\n", NULL},
    {"--no-keepalive's Connection: close dropped", H1("GET /", HOST "Connection: close\r\n"), false,
     PSEUDO("GET", "/"), NULL},
    {"fields a Connection field names dropped",
     H1("GET /", HOST "Connection: close, X-Hop\r\nX-Hop: 1\r\nX-Other: 2\r\n"
                      "connection: x-second\r\nX-Second: 3\r\n"),
     false, PSEUDO("GET", "/") "x-other: 2\n", NULL},
    {"TE: trailers kept", H1("GET /", HOST "TE: trailers\r\nConnection: TE\r\n"), false,
     PSEUDO("GET", "/") "te: trailers\n", NULL},
    {"TE with trailers among codings", H1("GET /", HOST "TE: gzip;q=0.5, Trailers\r\n"), false,
     PSEUDO("GET", "/") "te: trailers\n", NULL},
    {"TE without trailers dropped", H1("GET /", HOST "TE: gzip, deflate\r\n"), false,
     PSEUDO("GET", "/"), NULL},
    {"OPTIONS *", H1("OPTIONS *", HOST), false, PSEUDO("OPTIONS", "*"), NULL},
    {"absolute form: its authority wins over Host",
     H1("GET http://example.com:81/a/b?c", "Host: other\r\n"), true,
     ":method: GET\n:scheme: http\n:authority: example.com:81\n:path: /a/b?c\n", NULL},
    {"absolute form without a path", H1("GET HTTPS://Example.com", ""), false,
     ":method: GET\n:scheme: https\n:authority: Example.com\n:path: /\n", NULL},
    {"absolute form with a query and no path", H1("GET http://h?q=1", ""), false,
     ":method: GET\n:scheme: http\n:authority: h\n:path: /?q=1\n", NULL},
    {"IPv6 Host", H1("GET /", "Host: [::1]:8080\r\n"), false,
     ":method: GET\n:scheme: http\n:authority: [::1]:8080\n:path: /\n", NULL},
    {"HEAD", H1("HEAD /h", HOST), false, PSEUDO("HEAD", "/h") "head\n", NULL},
    {"POST with Content-Length",
     H1("POST /p", HOST "Content-Type: text/plain\r\nContent-Length: 5\r\n") "hello", false,
     PSEUDO("POST", "/p") "content-type: text/plain\ncontent-length: 5\nbody: hello\n", NULL},
    {"Content-Length list made one number",
     H1("PUT /p", "Content-Length: 3, 3\r\n" HOST "Content-Length: 3\r\n") "abc", false,
     PSEUDO("PUT", "/p") "content-length: 3\nbody: abc\n", NULL},
    {"empty body", H1("POST /p", HOST "Content-Length: 0\r\n"), false,
     PSEUDO("POST", "/p") "content-length: 0\n", NULL},
    {"chunked body de-chunked and given a length",
     H1("POST /c", HOST "Transfer-Encoding: chunked\r\nX-After: 1\r\n") "5;ext=1\r\nhello\r\n6\r\n "
                                                                        "world\r\n0\r\n\r\n",
     false, PSEUDO("POST", "/c") "x-after: 1\ncontent-length: 11\nbody: hello world\n", NULL},
    {"empty chunked body", H1("POST /c", HOST "Transfer-Encoding: chunked\r\n") "0\r\n\r\n", false,
     PSEUDO("POST", "/c") "content-length: 0\n", NULL},
    {"several requests, one HEAD, bare LF and empty lines between",
     H1("GET /1", HOST) "\r\n" H1(
         "HEAD /2", HOST) "POST /3 HTTP/1.1\nHost: localhost:8080\nContent-Length: 2\n\nab\r\n",
     false,
     PSEUDO("GET", "/1") "--\n" PSEUDO("HEAD", "/2") "head\n--\n" PSEUDO(
         "POST", "/3") "content-length: 2\nbody: ab\n",
     NULL},
    {"HTTP/1.0 request", "GET /old HTTP/1.0\r\n" HOST "\r\n", false, PSEUDO("GET", "/old"), NULL},

    {"CONNECT", H1("CONNECT example.com:443", "Host: example.com:443\r\n"), false, NULL,
     "CONNECT opens a tunnel; volley cannot send it over HTTP/2"},
    {"no Host", H1("GET /", "Accept: */*\r\n"), false, NULL,
     "no Host header field: HTTP/2 needs an :authority"},
    {"two Hosts", H1("GET /", HOST HOST), false, NULL,
     "2 Host header fields (HTTP/2 has one :authority)"},
    {"empty Host", H1("GET /", "Host:\r\n"), false, NULL, "empty Host: HTTP/2 needs an :authority"},
    {"Host with a space", H1("GET /", "Host: a b\r\n"), false, NULL,
     "Host 'a b' is not a valid :authority"},
    {"Host with user information", H1("GET /", "Host: user@h\r\n"), false, NULL,
     "Host 'user@h' has user information, which HTTP/2 forbids"},
    {"absolute form with user information", H1("GET http://u:p@h/", ""), false, NULL,
     "authority in the request target 'u:p@h' has user information, which HTTP/2 forbids"},
    {"absolute form with an empty authority", H1("GET http:///x", HOST), false, NULL,
     "empty authority in the request target: HTTP/2 needs an :authority"},
    {"* with GET", H1("GET *", HOST), false, NULL, "request target * is for OPTIONS only"},
    {"relative target", H1("GET index.html", HOST), false, NULL,
     "request target 'index.html' is neither a path, * nor an http(s) URL"},
    {"other scheme", H1("GET ftp://h/x", HOST), false, NULL,
     "request target 'ftp://h/x' is neither a path, * nor an http(s) URL"},
    {"chunked trailers",
     H1("POST /", HOST "Transfer-Encoding: chunked\r\n") "1\r\na\r\n0\r\nX-Trailer: 1\r\n\r\n",
     false, NULL, "a chunked body with trailer fields cannot be sent over HTTP/2"},
    {"an error names the request in a batch", H1("GET /", HOST) H1("GET /", HOST) H1("GET /", ""),
     false, NULL, "request 3 of 3: no Host header field: HTTP/2 needs an :authority"},
};

TEST(h2req_table)
{
    struct buf got = {0};
    for (size_t i = 0; i < sizeof conversions / sizeof conversions[0]; i++) {
        const struct conversion *c = &conversions[i];
        struct request r = {0};
        struct h2req h = {0};
        char err[256];
        bool ok = build(&r, &h, c->in, c->tls, err, sizeof err);
        if (ok != (c->out != NULL)) {
            UNIT_FAIL("%s: %s", c->name, ok ? "accepted" : err);
        } else if (ok) {
            render(&got, &h);
            if (strcmp(got.data, c->out) != 0)
                UNIT_FAIL("%s: got\n%s\nexpected\n%s", c->name, got.data, c->out);
            CHECK_U64(h.count, r.depth);
            check_delivery(&h);
        } else {
            CHECK_STR(err, c->err);
            CHECK_U64(h.count, 0);
        }
        h2req_free(&h);
        request_free(&r);
    }
    buf_free(&got);
}

/* ------------------------------------------------------------------------ */
/* Storage                                                                   */
/* ------------------------------------------------------------------------ */

static bool within(const struct request *r, const void *p)
{
    return (const char *)p >= r->data && (const char *)p < r->data + r->len;
}

TEST(h2req_points_into_the_request_bytes)
{
    struct request r = {0};
    struct h2req h = {0};
    char err[256];
    CHECK(
        build(&r, &h,
              H1("POST /p", "host: h\r\ncontent-type: a\r\nX-Up: b\r\nContent-Length: 2\r\n") "xy",
              false, err, sizeof err));
    const struct h2req_msg *m = &h.msgs[0];
    CHECK_U64(m->nvlen, 7);
    CHECK(within(&r, m->nv[0].value) && within(&r, m->nv[2].value) && within(&r, m->nv[3].value));
    CHECK(within(&r, m->nv[4].name) && within(&r, m->nv[4].value));  /* content-type */
    CHECK(!within(&r, m->nv[5].name) && within(&r, m->nv[5].value)); /* X-Up -> x-up */
    CHECK(!within(&r, m->nv[6].name) && within(&r, m->nv[6].value)); /* Content-Length */
    CHECK(within(&r, m->body) && m->body_len == 2);
    for (size_t k = 0; k < m->nvlen; k++)
        CHECK_U64(m->nv[k].flags, NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE);
    h2req_free(&h);
    request_free(&r);
}

TEST(h2req_reused_for_larger_and_smaller_batches)
{
    struct request r = {0};
    struct h2req h = {0};
    struct buf got = {0};
    char err[256];
    CHECK(build(&r, &h, H1("GET /a", HOST), false, err, sizeof err));
    CHECK(build(&r, &h,
                H1("GET /b", HOST "X-A: 1\r\n") H1("GET /c", HOST "X-B: 2\r\n")
                    H1("POST /d", HOST "Transfer-Encoding: chunked\r\n") "3\r\nabc\r\n0\r\n\r\n",
                false, err, sizeof err));
    render(&got, &h);
    CHECK_STR(got.data,
              PSEUDO("GET", "/b") "x-a: 1\n--\n" PSEUDO("GET", "/c") "x-b: 2\n--\n" PSEUDO(
                  "POST", "/d") "content-length: 3\nbody: abc\n");
    CHECK(!build(&r, &h, H1("GET /e", ""), false, err, sizeof err));
    CHECK_U64(h.count, 0);
    CHECK(build(&r, &h, H1("HEAD /f", HOST), true, err, sizeof err));
    render(&got, &h);
    CHECK_STR(got.data,
              ":method: HEAD\n:scheme: https\n:authority: localhost:8080\n:path: /f\nhead\n");
    buf_free(&got);
    h2req_free(&h);
    request_free(&r);
}

TEST(h2req_messages_name_the_protocol_asked_for)
{
    struct request r = {0};
    struct h2req h = {0};
    char err[256], parse_err[128];
    const char *text = H1("GET /", "Accept: */*\r\n");
    CHECK(request_set(&r, xstrdup(text), strlen(text), parse_err, sizeof parse_err));
    CHECK(!h2req_build_for(&h, &r, true, "HTTP/3", err, sizeof err));
    CHECK_STR(err, "no Host header field: HTTP/3 needs an :authority");
    CHECK(!h2req_build(&h, &r, true, err, sizeof err));
    CHECK_STR(err, "no Host header field: HTTP/2 needs an :authority");
    h2req_free(&h);
    request_free(&r);
}

/* A batch copy converts again only when the bytes changed; the copy, not the
 * caller's buffer, is what its header lists point into. */
TEST(h2req_batch_converts_once_per_new_bytes)
{
    struct h2req_batch b = {0};
    struct request r = {0};
    struct buf got = {0};
    char parse_err[128];
    const char *text = H1("GET /one", HOST);
    CHECK(request_set(&r, xstrdup(text), strlen(text), parse_err, sizeof parse_err));
    CHECK(h2req_batch_set(&b, &r, false, "HTTP/3"));
    CHECK(!h2req_batch_set(&b, &r, false, "HTTP/3"));
    render(&got, &b.conv);
    CHECK_STR(got.data, PSEUDO("GET", "/one"));
    memset(r.data, 'X', r.len); /* the caller's buffer is refilled */
    render(&got, &b.conv);
    CHECK_STR(got.data, PSEUDO("GET", "/one"));
    text = H1("GET /two", HOST);
    request_free(&r);
    CHECK(request_set(&r, xstrdup(text), strlen(text), parse_err, sizeof parse_err));
    CHECK(h2req_batch_set(&b, &r, false, "HTTP/3"));
    render(&got, &b.conv);
    CHECK_STR(got.data, PSEUDO("GET", "/two"));
    buf_free(&got);
    h2req_batch_free(&b);
    request_free(&r);
}

/* The static request's conversion follows the request it is given. */
TEST(h2req_static_converts_the_request_it_is_given)
{
    struct h2req_static s = {0};
    struct request r1 = {0}, r2 = {0};
    struct buf got = {0};
    char parse_err[128];
    const char *one = H1("GET /s", HOST), *two = H1("GET /t", HOST);
    CHECK(request_set(&r1, xstrdup(one), strlen(one), parse_err, sizeof parse_err));
    CHECK(request_set(&r2, xstrdup(two), strlen(two), parse_err, sizeof parse_err));
    render(&got, h2req_static(&s, &r1, false, "HTTP/3"));
    CHECK_STR(got.data, PSEUDO("GET", "/s"));
    render(&got, h2req_static(&s, &r2, false, "HTTP/3"));
    CHECK_STR(got.data, PSEUDO("GET", "/t"));
    render(&got, h2req_static(&s, &r1, false, "HTTP/3"));
    CHECK_STR(got.data, PSEUDO("GET", "/s"));
    buf_free(&got);
    h2req_static_free(&s);
    request_free(&r1);
    request_free(&r2);
}
