/* Unit tests for src/http.c: every response in the tables is fed whole, split
 * in two at every byte boundary, and one byte at a time, with and without
 * want_head/want_body; then the error cases, the head limit, and the request
 * checker with wrk's "<what> at <line>:<column>" messages.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include "http.h"
#include "http_request.h"
#include "xalloc.h"

#define MAX_RESP 6

/* ------------------------------------------------------------------------ */
/* A caller that feeds the parser the way a connection does                 */
/* ------------------------------------------------------------------------ */

struct got_resp {
    int status;
    bool keep_alive;
    size_t end; /* offset in the input just past this response */
    struct buf head, body;
};

struct got {
    int n;
    struct got_resp r[MAX_RESP];
    bool failed;
    enum http_error error;
    size_t fed; /* input bytes handed to http_parse when it failed */
    enum http_result eof;
};

static void buf_set(struct buf *dst, const struct buf *src)
{
    dst->data = xmalloc(src->len + 1);
    if (src->len)
        memcpy(dst->data, src->data, src->len);
    dst->data[src->len] = '\0';
    dst->len = src->len;
}

static void got_free(struct got *g)
{
    for (int i = 0; i < g->n; i++) {
        free(g->r[i].head.data);
        free(g->r[i].body.data);
    }
}

static void record(struct got *g, const struct http_parser *p, size_t end)
{
    if (g->n == MAX_RESP)
        return;
    struct got_resp *r = &g->r[g->n++];
    r->status = p->status;
    r->keep_alive = p->keep_alive;
    r->end = end;
    buf_set(&r->head, &p->head);
    buf_set(&r->body, &p->body);
}

/* When set, every parser feed() makes shares this head cache, as the
 * connections of one worker do. */
static struct http_head_cache *feed_cache;

/* Feed in[0..len) in pieces ending at cuts[0], cuts[1], ... and len, each piece
 * in its own exact-size allocation so that AddressSanitizer catches a read past
 * it; then report EOF. heads[i]: response i answers a HEAD request. */
static void feed(const char *in, size_t len, const size_t *cuts, size_t ncuts, bool want,
                 const bool *heads, struct got *g)
{
    struct http_parser p;
    memset(g, 0, sizeof *g);
    http_parser_init(&p);
    p.cache = feed_cache;
    p.want_head = p.want_body = want;
    http_begin(&p, heads[0]);
    for (size_t k = 0; k <= ncuts && !g->failed; k++) {
        /* cppcheck thinks cuts may be NULL here, but with NULL ncuts is 0 and
         * cuts is never read. */
        /* cppcheck-suppress nullPointer */
        size_t a = k ? cuts[k - 1] : 0, b = k < ncuts ? cuts[k] : len, n = b - a, off = 0;
        char *piece = xmalloc(n);
        memcpy(piece, in + a, n);
        while (off < n) {
            size_t used = 0;
            enum http_result r = http_parse(&p, piece + off, n - off, &used);
            if (r == HTTP_MORE) {
                CHECK_U64(used, n - off);
                break;
            }
            if (r == HTTP_ERROR) {
                g->failed = true;
                g->error = p.error;
                g->fed = a + off + used;
                break;
            }
            CHECK(used > 0);
            off += used;
            record(g, &p, a + off);
            http_begin(&p, g->n < MAX_RESP && heads[g->n]);
        }
        free(piece);
    }
    if (!g->failed) {
        g->eof = http_eof(&p);
        if (g->eof == HTTP_DONE)
            record(g, &p, len);
        else if (g->eof == HTTP_ERROR) {
            g->failed = true;
            g->error = p.error;
            g->fed = len;
        }
    }
    http_parser_free(&p);
}

/* ------------------------------------------------------------------------ */
/* Valid responses                                                          */
/* ------------------------------------------------------------------------ */

struct resp {
    const char *bytes; /* the response as sent */
    bool head_request;
    int status;
    bool keep_alive;
    const char *head; /* kept with want_head */
    const char *body; /* kept with want_body, dechunked */
};

struct resp_case {
    const char *name;
    struct resp r[MAX_RESP]; /* sent back to back on one connection */
};

#define OK11 "HTTP/1.1 200 OK\r\n"
#define CL0 "Content-Length: 0\r\n"
#define CHUNKED "Transfer-Encoding: chunked\r\n"

static const struct resp_case resp_cases[] = {
    {"fixed_length",
     {{OK11 "Content-Length: 5\r\nServer: t\r\n\r\nhello", false, 200, true,
       OK11 "Content-Length: 5\r\nServer: t\r\n\r\n", "hello"}}},
    {"content_length_zero", {{OK11 CL0 "\r\n", false, 200, true, OK11 CL0 "\r\n", ""}}},
    {"content_length_ows",
     {{OK11 "content-length:\t 3 \t\r\n\r\nabc", false, 200, true,
       OK11 "content-length:\t 3 \t\r\n\r\n", "abc"}}},
    {"content_length_identical_duplicates",
     {{OK11 "Content-Length: 3\r\nCONTENT-LENGTH: 3\r\n\r\nabc", false, 200, true,
       OK11 "Content-Length: 3\r\nCONTENT-LENGTH: 3\r\n\r\n", "abc"}}},
    {"content_length_list",
     {{OK11 "Content-Length: 3, 3,3\r\n\r\nabc", false, 200, true,
       OK11 "Content-Length: 3, 3,3\r\n\r\n", "abc"}}},
    {"chunked_extensions_trailers",
     {{OK11 CHUNKED "\r\n5;name=value\r\nhello\r\nA ; x=\"y\"\r\n, world!!!\r\n"
                    "0;last\r\nExpires: never\r\nX-Sum:1\r\n\r\n",
       false, 200, true, OK11 CHUNKED "\r\n", "hello, world!!!"}}},
    {"chunked_hex_digits",
     {{OK11 CHUNKED "\r\n000a\r\n0123456789\r\nf\r\nabcdefghijklmno\r\n00\r\n\r\n", false, 200,
       true, OK11 CHUNKED "\r\n", "0123456789abcdefghijklmno"}}},
    {"chunked_empty_body",
     {{OK11 CHUNKED "\r\n0\r\n\r\n", false, 200, true, OK11 CHUNKED "\r\n", ""}}},
    {"chunked_final_coding",
     {{OK11 "Transfer-Encoding: gzip\r\ntransfer-encoding: Chunked\r\n\r\n2\r\nzz\r\n0\r\n\r\n",
       false, 200, true, OK11 "Transfer-Encoding: gzip\r\ntransfer-encoding: Chunked\r\n\r\n",
       "zz"}}},
    {"chunked_overrides_content_length",
     {{OK11 "Content-Length: 100\r\n" CHUNKED "\r\n3\r\nabc\r\n0\r\n\r\n", false, 200, true,
       OK11 "Content-Length: 100\r\n" CHUNKED "\r\n", "abc"}}},
    {"chunked_ignores_bad_content_length",
     {{OK11 "Content-Length: nope\r\n" CHUNKED "\r\n3\r\nabc\r\n0\r\n\r\n", false, 200, true,
       OK11 "Content-Length: nope\r\n" CHUNKED "\r\n", "abc"}}},
    {"te_not_final_chunked_is_close_delimited",
     {{OK11 "Transfer-Encoding: chunked, gzip\r\nContent-Length: 2\r\n\r\n3\r\nabc\r\n", false, 200,
       false, OK11 "Transfer-Encoding: chunked, gzip\r\nContent-Length: 2\r\n\r\n",
       "3\r\nabc\r\n"}}},
    {"close_delimited",
     {{OK11 "Content-Type: text/plain\r\n\r\nuntil the peer closes", false, 200, false,
       OK11 "Content-Type: text/plain\r\n\r\n", "until the peer closes"}}},
    {"close_delimited_empty", {{OK11 "\r\n", false, 200, false, OK11 "\r\n", ""}}},
    {"http10_without_keep_alive",
     {{"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", false, 200, false,
       "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n", "hi"}}},
    {"http10_keep_alive",
     {{"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi", false, 200, true,
       "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\n", "hi"},
      {"HTTP/1.0 404 Not Found\r\nconnection: foo\r\nConnection:keep-alive\r\n" CL0 "\r\n", false,
       404, true,
       "HTTP/1.0 404 Not Found\r\nconnection: foo\r\nConnection:keep-alive\r\n" CL0 "\r\n", ""}}},
    {"http10_close_delimited",
     {{"HTTP/1.0 200 OK\r\n\r\nbody", false, 200, false, "HTTP/1.0 200 OK\r\n\r\n", "body"}}},
    {"http10_transfer_encoding_is_close_delimited",
     {{"HTTP/1.0 200 OK\r\n" CHUNKED "Connection: keep-alive\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false,
       200, false, "HTTP/1.0 200 OK\r\n" CHUNKED "Connection: keep-alive\r\n\r\n",
       "3\r\nabc\r\n0\r\n\r\n"}}},
    {"connection_close_in_list",
     {{OK11 "Connection: upgrade , CLOSE\r\nContent-Length: 1\r\n\r\nx", false, 200, false,
       OK11 "Connection: upgrade , CLOSE\r\nContent-Length: 1\r\n\r\n", "x"}}},
    {"connection_close_beats_keep_alive",
     {{OK11 "Connection: keep-alive\r\nConnection: close\r\n" CL0 "\r\n", false, 200, false,
       OK11 "Connection: keep-alive\r\nConnection: close\r\n" CL0 "\r\n", ""}}},
    {"connection_tokens_like_close",
     {{OK11 "Connection: closed, x-close,close-ish\r\n" CL0 "\r\n", false, 200, true,
       OK11 "Connection: closed, x-close,close-ish\r\n" CL0 "\r\n", ""}}},
    {"head_with_content_length",
     {{OK11 "Content-Length: 1234\r\n\r\n", true, 200, true, OK11 "Content-Length: 1234\r\n\r\n",
       ""},
      {OK11 "Content-Length: 2\r\n\r\nok", false, 200, true, OK11 "Content-Length: 2\r\n\r\n",
       "ok"}}},
    {"head_with_chunked",
     {{OK11 CHUNKED "\r\n", true, 200, true, OK11 CHUNKED "\r\n", ""},
      {OK11 CL0 "\r\n", true, 200, true, OK11 CL0 "\r\n", ""}}},
    {"head_without_length",
     {{OK11 "Connection: keep-alive\r\n\r\n", true, 200, true,
       OK11 "Connection: keep-alive\r\n\r\n", ""}}},
    {"no_content_with_content_length",
     {{"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", false, 204, true,
       "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", ""},
      {"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n" CHUNKED "\r\n", false, 304, true,
       "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n" CHUNKED "\r\n", ""},
      {"HTTP/1.1 204 No Content\r\n\r\n", false, 204, true, "HTTP/1.1 204 No Content\r\n\r\n",
       ""}}},
    {"interim_responses_skipped",
     {{"HTTP/1.1 100 Continue\r\n\r\n"
       "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
       "HTTP/1.1 102\r\n\r\n" OK11 "Content-Length: 3\r\n\r\nabc",
       false, 200, true, OK11 "Content-Length: 3\r\n\r\n", "abc"}}},
    {"interim_before_head_response",
     {{"HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n" OK11 "Content-Length: 9\r\n\r\n", true,
       200, true, OK11 "Content-Length: 9\r\n\r\n", ""}}},
    {"switching_protocols",
     {{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
       false, 101, false,
       "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
       ""}}},
    {"bare_lf",
     {{"HTTP/1.1 200 OK\nContent-Length: 3\n\nabc", false, 200, true,
       "HTTP/1.1 200 OK\nContent-Length: 3\n\n", "abc"},
      {"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n1;x\r\nd\n0\nT: 1\n\n", false, 200,
       true, "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n", "abcd"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\n\r\nz", false, 200, true,
       "HTTP/1.1 200 OK\r\nContent-Length: 1\n\r\n", "z"}}},
    /* Sloppy but common, accepted as curl and wrk accept them: more than one
     * SP after the version, empty lines before a status line (a stray CRLF
     * after a body), obsolete line folding (RFC 9112 §5.2: replaced by SP). */
    {"status_double_space",
     {{"HTTP/1.1  200 OK\r\n" CL0 "\r\n", false, 200, true, "HTTP/1.1  200 OK\r\n" CL0 "\r\n",
       ""}}},
    {"blank_lines_before_the_status_line",
     {{"\r\n\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, 200, true,
       OK11 "Content-Length: 2\r\n\r\n", "ok"},
      {"\r\n" OK11 "Content-Length: 2\r\n\r\nhi", false, 200, true,
       OK11 "Content-Length: 2\r\n\r\n", "hi"}}},
    {"obs_fold",
     {{OK11 "X-A: a\r\n  b\r\n\tc\r\nContent-Length: 2\r\n\r\nok", false, 200, true,
       OK11 "X-A: a    b  \tc\r\nContent-Length: 2\r\n\r\n", "ok"},
      {OK11 "Transfer-Encoding: gzip,\n chunked\n\n3\nabc\n0\nT: 1\n 2\n\n", false, 200, true,
       OK11 "Transfer-Encoding: gzip,  chunked\r\n\n", "abc"}}},
    {"missing_reason_phrase",
     {{"HTTP/1.1 200\r\n" CL0 "\r\n", false, 200, true, "HTTP/1.1 200\r\n" CL0 "\r\n", ""},
      {"HTTP/1.1 503 \r\n" CL0 "\r\n", false, 503, true, "HTTP/1.1 503 \r\n" CL0 "\r\n", ""},
      {"HTTP/1.1 299 odd: reason\t\x80\r\n" CL0 "\r\n", false, 299, true,
       "HTTP/1.1 299 odd: reason\t\x80\r\n" CL0 "\r\n", ""}}},
    {"pipelined",
     {{OK11 "Content-Length: 3\r\n\r\none", false, 200, true, OK11 "Content-Length: 3\r\n\r\n",
       "one"},
      {"HTTP/1.1 404 Not Found\r\n" CHUNKED "\r\n3\r\ntwo\r\n0\r\n\r\n", false, 404, true,
       "HTTP/1.1 404 Not Found\r\n" CHUNKED "\r\n", "two"},
      {"HTTP/1.1 100 Continue\r\n\r\n" OK11 CL0 "\r\n", false, 200, true, OK11 CL0 "\r\n", ""},
      {"HTTP/1.1 304 Not Modified\r\n\r\n", false, 304, true, "HTTP/1.1 304 Not Modified\r\n\r\n",
       ""},
      {OK11 "Content-Length: 5\r\nConnection: close\r\n\r\nthree", false, 200, false,
       OK11 "Content-Length: 5\r\nConnection: close\r\n\r\n", "three"}}},
    {"repeated_heads",
     {{OK11 "Content-Length: 2\r\n\r\nab", false, 200, true, OK11 "Content-Length: 2\r\n\r\n",
       "ab"},
      {OK11 "Content-Length: 2\r\n\r\ncd", false, 200, true, OK11 "Content-Length: 2\r\n\r\n",
       "cd"},
      {OK11 "Content-Length: 3\r\n\r\nefg", false, 200, true, OK11 "Content-Length: 3\r\n\r\n",
       "efg"},
      {OK11 "Content-Length: 2\r\n\r\n", true, 200, true, OK11 "Content-Length: 2\r\n\r\n", ""},
      {OK11 "Content-Length: 2\r\nConnection: close\r\n\r\nhi", false, 200, false,
       OK11 "Content-Length: 2\r\nConnection: close\r\n\r\n", "hi"}}},
    {"pipelined_then_close_delimited",
     {{OK11 "Content-Length: 1\r\n\r\na", false, 200, true, OK11 "Content-Length: 1\r\n\r\n", "a"},
      {OK11 "\r\nrest\r\nHTTP/1.1 200 OK\r\n\r\n", false, 200, false, OK11 "\r\n",
       "rest\r\nHTTP/1.1 200 OK\r\n\r\n"}}},
};

/* Compare one feeding of a case; returns false (after one failure line) on the
 * first difference so that a broken split does not print thousands of lines. */
static bool compare(const struct resp_case *c, int n, const struct got *g, bool want,
                    const char *mode, size_t at, size_t len)
{
    size_t end = 0;
    char where[128];
    snprintf(where, sizeof where, "%s, %s %zu, want=%d", c->name, mode, at, want);
    if (g->failed) {
        UNIT_FAIL("%s: error %s after %zu bytes", where, http_error_str(g->error), g->fed);
        return false;
    }
    if (g->n != n) {
        UNIT_FAIL("%s: %d responses, expected %d", where, g->n, n);
        return false;
    }
    for (int i = 0; i < n; i++) {
        const struct resp *e = &c->r[i];
        const struct got_resp *r = &g->r[i];
        end += strlen(e->bytes);
        if (r->status != e->status || r->keep_alive != e->keep_alive || r->end != end) {
            UNIT_FAIL("%s: response %d: status %d keep_alive %d end %zu, expected %d %d %zu", where,
                      i, r->status, r->keep_alive, r->end, e->status, e->keep_alive, end);
            return false;
        }
        const char *head = want ? e->head : "", *body = want ? e->body : "";
        if (strcmp(r->head.data, head) != 0 || strcmp(r->body.data, body) != 0) {
            UNIT_FAIL("%s: response %d: head \"%s\" body \"%s\", expected \"%s\" \"%s\"", where, i,
                      r->head.data, r->body.data, head, body);
            return false;
        }
    }
    if (end != len) {
        UNIT_FAIL("%s: responses cover %zu of %zu bytes", where, end, len);
        return false;
    }
    return true;
}

static char *join(const struct resp_case *c, int *n, bool *heads)
{
    size_t len = 0;
    for (*n = 0; *n < MAX_RESP && c->r[*n].bytes; (*n)++)
        len += strlen(c->r[*n].bytes);
    char *in = xmalloc(len + 1);
    in[0] = '\0';
    memset(heads, 0, MAX_RESP * sizeof *heads);
    for (int i = 0; i < *n; i++) {
        strcat(in, c->r[i].bytes);
        heads[i] = c->r[i].head_request;
    }
    return in;
}

/* Whether to split at boundary i. With sparse (for large bodies, where every
 * split costs a pass over the whole input), only near line ends, which are
 * where the framing is, and at every 101st byte of the body text between them. */
static bool split_here(const char *in, size_t len, size_t i, bool sparse)
{
    enum { NEAR = 300 };
    if (!sparse || i % 101 == 0)
        return true;
    size_t a = i > NEAR ? i - NEAR : 0, b = len - i > NEAR ? i + NEAR : len;
    return memchr(in + a, '\n', b - a) != NULL;
}

/* Whole, then two pieces split at every boundary, then one byte at a time. */
static void run_case(const struct resp_case *c, bool sparse)
{
    bool heads[MAX_RESP];
    int n;
    char *in = join(c, &n, heads);
    size_t len = strlen(in);
    size_t *cuts = xmalloc((len + 1) * sizeof *cuts);
    struct got g;
    for (int want = 0; want <= 1; want++) {
        feed(in, len, NULL, 0, want, heads, &g);
        compare(c, n, &g, want, "whole", len, len);
        got_free(&g);
        for (size_t i = 1; i < len; i++) {
            if (!split_here(in, len, i, sparse))
                continue;
            feed(in, len, &i, 1, want, heads, &g);
            bool ok = compare(c, n, &g, want, "split at", i, len);
            got_free(&g);
            if (!ok)
                break;
        }
        for (size_t i = 1; i < len; i++)
            cuts[i - 1] = i;
        feed(in, len, cuts, len ? len - 1 : 0, want, heads, &g);
        compare(c, n, &g, want, "bytewise", 1, len);
        got_free(&g);
    }
    free(cuts);
    free(in);
}

TEST(responses_fed_in_every_split)
{
    for (size_t i = 0; i < sizeof resp_cases / sizeof resp_cases[0]; i++)
        run_case(&resp_cases[i], false);
}

/* The same with one head cache shared by every feeding, warm from the start:
 * a head found in it must give exactly what parsing it gives. */
TEST(responses_through_a_head_cache)
{
    static struct http_head_cache cache;
    feed_cache = &cache;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof resp_cases / sizeof resp_cases[0]; i++)
            run_case(&resp_cases[i], false);
    feed_cache = NULL;
}

/* What the cache holds and when it is used. */
TEST(head_cache_hits_and_misses)
{
    static const char a[] = OK11 "Content-Length: 2\r\n\r\nab";
    static const char b[] = OK11 "Content-Length: 3\r\n\r\nabc";
    static const char interim[] =
        "HTTP/1.1 100 Continue\r\n\r\n" OK11 "Content-Length: 2\r\n\r\nab";
    static struct http_head_cache cache;
    struct http_parser p;
    size_t used;
    http_parser_init(&p);
    p.cache = &cache;
    http_begin(&p, false);
    CHECK(http_parse(&p, a, sizeof a - 1, &used) == HTTP_DONE);
    CHECK_U64(cache.len, sizeof a - 3);
    CHECK(memcmp(cache.data, a, cache.len) == 0);
    CHECK(cache.has_length && cache.length == 2 && cache.status == 200);
    /* A head cut short is neither looked up nor stored; b replaces a. */
    http_begin(&p, false);
    CHECK(http_parse(&p, b, 20, &used) == HTTP_MORE);
    CHECK(http_parse(&p, b + 20, sizeof b - 21, &used) == HTTP_DONE);
    CHECK_U64(cache.length, 2);
    http_begin(&p, false);
    CHECK(http_parse(&p, b, sizeof b - 1, &used) == HTTP_DONE);
    CHECK_U64(used, sizeof b - 1);
    CHECK_U64(cache.length, 3);
    /* After an interim response only the final head is kept. */
    http_begin(&p, false);
    CHECK(http_parse(&p, interim, sizeof interim - 1, &used) == HTTP_DONE);
    CHECK_U64(cache.len, sizeof a - 3);
    CHECK(memcmp(cache.data, a, cache.len) == 0);
    /* A hit answering a HEAD request has no body, whatever the head says. */
    http_begin(&p, true);
    CHECK(http_parse(&p, a, sizeof a - 3, &used) == HTTP_DONE);
    CHECK_U64(used, sizeof a - 3);
    CHECK(p.keep_alive);
    http_parser_free(&p);
}

/* A body larger than any read buffer, both with Content-Length and chunked. */
TEST(large_body)
{
    enum { BODY = 40000 };
    char *body = xmalloc(BODY + 1), *fixed = xmalloc(BODY + 100), *chunked = xmalloc(BODY + 200);
    for (int i = 0; i < BODY; i++)
        body[i] = (char)('a' + i % 26);
    body[BODY] = '\0';
    snprintf(fixed, BODY + 100, OK11 "Content-Length: %d\r\n\r\n%s", BODY, body);
    /* Chunks of 30000 and 10000 bytes: 0x7530 and 0x2710. */
    snprintf(chunked, BODY + 200, OK11 CHUNKED "\r\n7530\r\n%.30000s\r\n2710\r\n%s\r\n0\r\n\r\n",
             body, body + 30000);
    struct resp_case c = {"large_body",
                          {{fixed, false, 200, true, OK11 "Content-Length: 40000\r\n\r\n", body},
                           {chunked, false, 200, true, OK11 CHUNKED "\r\n", body}}};
    run_case(&c, true);
    free(body);
    free(fixed);
    free(chunked);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

struct err_case {
    const char *name;
    const char *in;
    bool head_request;
    enum http_error error;
    int ok; /* complete responses before the error */
};

static const struct err_case err_cases[] = {
    {"garbage", "garbage\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"binary", "\x16\x03\x01\x02\x05\x01\x03\x01\xfc\x03\x03\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"short_status", "HTTP/1.1 20 OK\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"long_status", "HTTP/1.1 2000 OK\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"status_not_digits", "HTTP/1.1 2x0 OK\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"status_below_100", "HTTP/1.1 099 Odd\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"status_no_space_reason", "HTTP/1.1 200OK\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"version_2", "HTTP/2.0 200 OK\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"version_lowercase", "http/1.1 200 OK\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"version_09", "HTTP/0.9 200 OK\r\n\r\n", false, HTTP_ERR_STATUS_LINE, 0},
    {"blank_line_then_garbage", "\r\nXTTP/1.1 200 OK\r\n" CL0 "\r\n", false, HTTP_ERR_STATUS_LINE,
     0},
    {"header_without_colon", OK11 "NoColon\r\n\r\n", false, HTTP_ERR_HEADER, 0},
    {"header_empty_name", OK11 ": value\r\n\r\n", false, HTTP_ERR_HEADER, 0},
    {"header_space_before_colon", OK11 "Name : value\r\n\r\n", false, HTTP_ERR_HEADER, 0},
    {"header_obs_fold_without_a_field", OK11 "  b\r\n\r\n", false, HTTP_ERR_HEADER, 0},
    {"content_length_not_digits", OK11 "Content-Length: 12a\r\n\r\n", false,
     HTTP_ERR_CONTENT_LENGTH, 0},
    {"content_length_negative", OK11 "Content-Length: -1\r\n\r\n", false, HTTP_ERR_CONTENT_LENGTH,
     0},
    {"content_length_empty", OK11 "Content-Length: \r\n\r\n", false, HTTP_ERR_CONTENT_LENGTH, 0},
    {"content_length_inner_space", OK11 "Content-Length: 1 2\r\n\r\n", false,
     HTTP_ERR_CONTENT_LENGTH, 0},
    {"content_length_plus", OK11 "Content-Length: +2\r\n\r\nab", false, HTTP_ERR_CONTENT_LENGTH, 0},
    {"content_length_list_differs", OK11 "Content-Length: 3, 4\r\n\r\nabcd", false,
     HTTP_ERR_CONTENT_LENGTH, 0},
    {"content_length_list_empty_element", OK11 "Content-Length: 3,\r\n\r\nabc", false,
     HTTP_ERR_CONTENT_LENGTH, 0},
    {"content_length_duplicates_differ", OK11 "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
     false, HTTP_ERR_CONTENT_LENGTH, 0},
    {"content_length_overflow", OK11 "Content-Length: 18446744073709551616\r\n\r\n", false,
     HTTP_ERR_CONTENT_LENGTH, 0},
    {"content_length_max_then_eof", OK11 "Content-Length: 18446744073709551615\r\n\r\nabc", false,
     HTTP_ERR_TRUNCATED, 0},
    {"chunk_size_invalid", OK11 CHUNKED "\r\nzz\r\n", false, HTTP_ERR_CHUNK, 0},
    {"chunk_size_empty", OK11 CHUNKED "\r\n\r\n", false, HTTP_ERR_CHUNK, 0},
    {"chunk_size_negative", OK11 CHUNKED "\r\n-1\r\n", false, HTTP_ERR_CHUNK, 0},
    {"chunk_size_leading_space", OK11 CHUNKED "\r\n 1\r\na\r\n0\r\n\r\n", false, HTTP_ERR_CHUNK, 0},
    {"chunk_size_trailing_junk", OK11 CHUNKED "\r\n5 x\r\nhello\r\n0\r\n\r\n", false,
     HTTP_ERR_CHUNK, 0},
    {"chunk_size_overflow", OK11 CHUNKED "\r\n10000000000000000\r\n", false, HTTP_ERR_CHUNK, 0},
    {"chunk_data_too_long", OK11 CHUNKED "\r\n3\r\nabcd\r\n0\r\n\r\n", false, HTTP_ERR_CHUNK, 0},
    {"chunk_data_cr_without_lf", OK11 CHUNKED "\r\n3\r\nabc\rx0\r\n\r\n", false, HTTP_ERR_CHUNK, 0},
    {"trailer_without_colon", OK11 CHUNKED "\r\n0\r\nbad trailer\r\n\r\n", false, HTTP_ERR_HEADER,
     0},
    {"eof_before_status_line_end", "HTTP/1.1 20", false, HTTP_ERR_TRUNCATED, 0},
    {"eof_mid_head", OK11 "Content-", false, HTTP_ERR_TRUNCATED, 0},
    {"eof_before_blank_line", OK11 CL0, false, HTTP_ERR_TRUNCATED, 0},
    {"eof_mid_body", OK11 "Content-Length: 10\r\n\r\nabc", false, HTTP_ERR_TRUNCATED, 0},
    {"eof_mid_chunk", OK11 CHUNKED "\r\n5\r\nab", false, HTTP_ERR_TRUNCATED, 0},
    {"eof_mid_chunk_size", OK11 CHUNKED "\r\n5\r\nabcde\r\n1", false, HTTP_ERR_TRUNCATED, 0},
    {"eof_before_last_chunk", OK11 CHUNKED "\r\n5\r\nabcde\r\n", false, HTTP_ERR_TRUNCATED, 0},
    {"eof_in_trailers", OK11 CHUNKED "\r\n0\r\nX: 1\r\n", false, HTTP_ERR_TRUNCATED, 0},
    {"eof_after_interim", "HTTP/1.1 100 Continue\r\n\r\n", false, HTTP_ERR_TRUNCATED, 0},
    {"eof_after_head_response_head", OK11 "Content-Length: 10\r\n", true, HTTP_ERR_TRUNCATED, 0},
    {"garbage_after_response", OK11 CL0 "\r\nnot http\r\n", false, HTTP_ERR_STATUS_LINE, 1},
    {"truncated_after_response", OK11 CL0 "\r\nHTTP/1.1 200 OK\r\n", false, HTTP_ERR_TRUNCATED, 1},
};

static bool check_err(const struct err_case *c, const struct got *g, const char *mode, size_t at)
{
    if (!g->failed || g->error != c->error || g->n != c->ok) {
        UNIT_FAIL("%s, %s %zu: failed %d error \"%s\" after %d responses, expected \"%s\" after %d",
                  c->name, mode, at, g->failed, http_error_str(g->error), g->n,
                  http_error_str(c->error), c->ok);
        return false;
    }
    return true;
}

static void run_err_cases(void)
{
    for (size_t k = 0; k < sizeof err_cases / sizeof err_cases[0]; k++) {
        const struct err_case *c = &err_cases[k];
        bool heads[MAX_RESP] = {c->head_request};
        size_t len = strlen(c->in);
        size_t *cuts = xmalloc((len + 1) * sizeof *cuts);
        struct got g;
        feed(c->in, len, NULL, 0, true, heads, &g);
        check_err(c, &g, "whole", len);
        got_free(&g);
        for (size_t i = 1; i < len; i++) {
            feed(c->in, len, &i, 1, i % 2, heads, &g);
            bool ok = check_err(c, &g, "split at", i);
            got_free(&g);
            if (!ok)
                break;
        }
        for (size_t i = 1; i < len; i++)
            cuts[i - 1] = i;
        feed(c->in, len, cuts, len - 1, false, heads, &g);
        check_err(c, &g, "bytewise", 1);
        got_free(&g);
        free(cuts);
    }
}

TEST(errors_in_every_split) { run_err_cases(); }

TEST(errors_through_a_head_cache)
{
    static struct http_head_cache cache;
    feed_cache = &cache;
    for (int pass = 0; pass < 2; pass++)
        run_err_cases();
    feed_cache = NULL;
}

TEST(error_str_covers_every_error)
{
    for (int e = HTTP_ERR_NONE; e <= HTTP_ERR_TRUNCATED; e++) {
        CHECK(strlen(http_error_str((enum http_error)e)) > 0);
        CHECK(strcmp(http_error_str((enum http_error)e), "unknown error") != 0);
    }
}

TEST(error_state_sticks_until_begin)
{
    struct http_parser p;
    size_t used = 99;
    http_parser_init(&p);
    CHECK(http_parse(&p, "FTP 200\r\n", 9, &used) == HTTP_ERROR);
    CHECK(p.error == HTTP_ERR_STATUS_LINE);
    CHECK(http_parse(&p, OK11 CL0 "\r\n", 38, &used) == HTTP_ERROR);
    CHECK_U64(used, 0);
    CHECK(http_eof(&p) == HTTP_ERROR);
    http_begin(&p, false);
    CHECK(p.error == HTTP_ERR_NONE);
    CHECK(http_parse(&p, OK11 CL0 "\r\n", 38, &used) == HTTP_DONE);
    CHECK_U64(used, 38);
    http_parser_free(&p);
}

/* ------------------------------------------------------------------------ */
/* EOF, http_started, parser state between responses                        */
/* ------------------------------------------------------------------------ */

TEST(eof_before_anything_is_idle_close)
{
    struct http_parser p;
    http_parser_init(&p);
    CHECK(!http_started(&p));
    CHECK(http_eof(&p) == HTTP_MORE);
    CHECK(p.error == HTTP_ERR_NONE);
    http_parser_free(&p);
}

TEST(eof_between_responses_is_idle_close)
{
    static const char in[] = OK11 "Content-Length: 2\r\n\r\nhi";
    struct http_parser p;
    size_t used;
    http_parser_init(&p);
    http_begin(&p, false);
    CHECK(http_parse(&p, in, 0, &used) == HTTP_MORE);
    CHECK(!http_started(&p));
    CHECK(http_parse(&p, in, 1, &used) == HTTP_MORE);
    CHECK(http_started(&p));
    CHECK(http_parse(&p, in + 1, sizeof in - 2, &used) == HTTP_DONE);
    CHECK_U64(used, sizeof in - 2);
    /* Until http_begin, the parser stays done and consumes nothing. */
    CHECK(http_parse(&p, in, sizeof in - 1, &used) == HTTP_DONE);
    CHECK_U64(used, 0);
    http_begin(&p, false);
    CHECK(!http_started(&p));
    CHECK(http_eof(&p) == HTTP_MORE);
    http_parser_free(&p);
}

TEST(interim_response_counts_as_started)
{
    static const char in[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct http_parser p;
    size_t used;
    http_parser_init(&p);
    CHECK(http_parse(&p, in, sizeof in - 1, &used) == HTTP_MORE);
    CHECK(http_started(&p));
    CHECK(http_eof(&p) == HTTP_ERROR);
    CHECK(p.error == HTTP_ERR_TRUNCATED);
    http_parser_free(&p);
}

TEST(close_delimited_completes_at_eof)
{
    static const char in[] = "HTTP/1.1 500 Oops\r\nConnection: keep-alive\r\n\r\nbody";
    struct http_parser p;
    size_t used;
    http_parser_init(&p);
    p.want_body = true;
    CHECK(http_parse(&p, in, sizeof in - 1, &used) == HTTP_MORE);
    CHECK(http_eof(&p) == HTTP_DONE);
    CHECK_I64(p.status, 500);
    CHECK(!p.keep_alive);
    CHECK_U64(p.body.len, 4);
    CHECK(memcmp(p.body.data, "body", 4) == 0);
    http_parser_free(&p);
}

/* The common case, a whole head in one read, parses in place: nothing is
 * carried, so the carry buffer is never even allocated. */
TEST(whole_heads_need_no_carry)
{
    static const char in[] =
        OK11 "Content-Length: 3\r\n\r\nabc" OK11 CHUNKED "\r\n1\r\nx\r\n0\r\n\r\n";
    struct http_parser p;
    size_t used, off = 0;
    http_parser_init(&p);
    for (int i = 0; i < 1000; i++) {
        http_begin(&p, false);
        CHECK(http_parse(&p, in + off, sizeof in - 1 - off, &used) == HTTP_DONE);
        off = (off + used) % (sizeof in - 1);
    }
    CHECK_U64(p._carry.cap, 0);
    CHECK(p._carry.data == NULL);
    http_begin(&p, false);
    CHECK(http_parse(&p, in, 20, &used) == HTTP_MORE);
    CHECK(p._carry.cap > 0); /* a split head is carried */
    http_parser_free(&p);
}

TEST(want_buffers_reset_at_begin)
{
    static const char in[] = OK11 "Content-Length: 3\r\n\r\nabc";
    struct http_parser p;
    size_t used;
    http_parser_init(&p);
    p.want_head = p.want_body = true;
    CHECK(http_parse(&p, in, sizeof in - 1, &used) == HTTP_DONE);
    CHECK_U64(p.body.len, 3);
    CHECK_U64(p.head.len, sizeof in - 4);
    http_begin(&p, false);
    CHECK_U64(p.body.len, 0);
    CHECK_U64(p.head.len, 0);
    http_parser_free(&p);
}

/* ------------------------------------------------------------------------ */
/* The head size limit                                                       */
/* ------------------------------------------------------------------------ */

/* A head of exactly `size` bytes: status line, one padded field, blank line. */
static char *head_of_size(size_t size)
{
    static const char start[] = "HTTP/1.1 204 No Content\r\nX-Pad: ";
    char *s = xmalloc(size + 1);
    memcpy(s, start, sizeof start - 1);
    memset(s + sizeof start - 1, 'p', size - (sizeof start - 1) - 4);
    memcpy(s + size - 4, "\r\n\r\n", 4);
    s[size] = '\0';
    return s;
}

static enum http_result feed_size(const char *in, size_t len, size_t piece, struct http_parser *p)
{
    enum http_result r = HTTP_MORE;
    size_t used;
    for (size_t off = 0; off < len && r == HTTP_MORE; off += piece)
        r = http_parse(p, in + off, len - off < piece ? len - off : piece, &used);
    return r;
}

TEST(head_limit_is_exact)
{
    static const size_t pieces[] = {HTTP_MAX_HEAD + 1, 4096, 1};
    for (size_t k = 0; k < 3; k++) {
        struct http_parser p;
        char *at = head_of_size(HTTP_MAX_HEAD), *over = head_of_size(HTTP_MAX_HEAD + 1);
        http_parser_init(&p);
        CHECK(feed_size(at, HTTP_MAX_HEAD, pieces[k], &p) == HTTP_DONE);
        http_begin(&p, false);
        CHECK(feed_size(over, HTTP_MAX_HEAD + 1, pieces[k], &p) == HTTP_ERROR);
        CHECK(p.error == HTTP_ERR_HEAD_TOO_LARGE);
        http_parser_free(&p);
        free(at);
        free(over);
    }
}

/* A hostile 1 MiB header must fail once the limit is passed, not after the
 * parser has buffered all of it. */
static void check_huge_head(bool one_line)
{
    enum { MIB = 1 << 20, PIECE = 4096 };
    char *in = xmalloc(MIB);
    struct http_parser p;
    size_t used, fed = 0;
    enum http_result r = HTTP_MORE;
    memcpy(in, OK11 "X: ", 20);
    /* Either one field line of 1 MiB or many "X:hhhhh\n" lines. */
    for (size_t i = 20; i < MIB; i++)
        in[i] = one_line ? 'h' : "\nX:hhhhh"[i % 8];
    http_parser_init(&p);
    p.want_head = true;
    while (fed < MIB && r == HTTP_MORE) {
        r = http_parse(&p, in + fed, PIECE, &used);
        fed += PIECE;
    }
    CHECK(r == HTTP_ERROR);
    CHECK(p.error == HTTP_ERR_HEAD_TOO_LARGE);
    CHECK(fed <= HTTP_MAX_HEAD + PIECE);
    CHECK(p._carry.cap <= 2 * HTTP_MAX_HEAD);
    CHECK(p.head.cap <= 2 * HTTP_MAX_HEAD);
    http_parser_free(&p);
    free(in);
}

TEST(huge_header_line_fails_early) { check_huge_head(true); }

TEST(huge_header_section_fails_early) { check_huge_head(false); }

TEST(huge_trailer_section_fails)
{
    static const char start[] = OK11 CHUNKED "\r\n0\r\n";
    enum { PIECE = 1000 };
    char line[PIECE];
    struct http_parser p;
    size_t used, fed = 0;
    enum http_result r;
    memset(line, 't', sizeof line);
    memcpy(line, "T: ", 3);
    line[PIECE - 1] = '\n';
    http_parser_init(&p);
    r = http_parse(&p, start, sizeof start - 1, &used);
    while (r == HTTP_MORE && fed < 4 * HTTP_MAX_HEAD) {
        r = http_parse(&p, line, PIECE, &used);
        fed += PIECE;
    }
    CHECK(r == HTTP_ERROR);
    CHECK(p.error == HTTP_ERR_HEAD_TOO_LARGE);
    CHECK(fed <= HTTP_MAX_HEAD + PIECE);
    http_parser_free(&p);
}

/* A body longer than HTTP_MAX_BODY is framed as usual, and what is kept of it
 * for a response() hook stops at the limit. */
static void check_kept_body(const char *head, size_t body_len, bool close_delimited)
{
    enum { PIECE = 64 * 1024 };
    static char piece[PIECE];
    struct http_parser p;
    size_t used, left = body_len;
    memset(piece, 'b', sizeof piece);
    http_parser_init(&p);
    p.want_body = true;
    enum http_result r = http_parse(&p, head, strlen(head), &used);
    while (r == HTTP_MORE && left > 0) {
        size_t n = left < PIECE ? left : PIECE;
        r = http_parse(&p, piece, n, &used);
        left -= n;
    }
    if (close_delimited)
        r = http_eof(&p);
    CHECK(r == HTTP_DONE && left == 0);
    CHECK_U64(p.body.len, HTTP_MAX_BODY);
    CHECK(p.body.cap <= HTTP_MAX_BODY + 2 * 1024 * 1024);
    http_parser_free(&p);
}

TEST(kept_body_is_capped)
{
    char head[128];
    size_t len = HTTP_MAX_BODY + 5 * 64 * 1024 + 7;
    snprintf(head, sizeof head, OK11 "Content-Length: %zu\r\n\r\n", len);
    check_kept_body(head, len, false);
    check_kept_body(OK11 "\r\n", len, true);
}

/* Interim heads share the final head's limit: a server sending 100 Continue
 * forever is an error within HTTP_MAX_HEAD, not gigabytes later. */
TEST(endless_interim_responses_fail)
{
    enum { PAD = 1000 };
    char interim[PAD + 64];
    int n =
        snprintf(interim, sizeof interim, "HTTP/1.1 100 Continue\r\nX-Pad: %0*d\r\n\r\n", PAD, 0);
    struct http_parser p;
    size_t used, fed = 0;
    enum http_result r = HTTP_MORE;
    http_parser_init(&p);
    while (r == HTTP_MORE && fed < 100 * HTTP_MAX_HEAD) {
        r = http_parse(&p, interim, (size_t)n, &used);
        fed += (size_t)n;
    }
    CHECK(r == HTTP_ERROR);
    CHECK(p.error == HTTP_ERR_HEAD_TOO_LARGE);
    CHECK(fed <= HTTP_MAX_HEAD + (size_t)n);
    http_parser_free(&p);
}

TEST(huge_chunk_extension_fails)
{
    static const char start[] = OK11 CHUNKED "\r\n1;ext=";
    char pad[1000];
    struct http_parser p;
    size_t used, fed = 0;
    enum http_result r;
    memset(pad, 'e', sizeof pad);
    http_parser_init(&p);
    r = http_parse(&p, start, sizeof start - 1, &used);
    while (r == HTTP_MORE && fed < 4 * HTTP_MAX_HEAD) {
        r = http_parse(&p, pad, sizeof pad, &used);
        fed += sizeof pad;
    }
    CHECK(r == HTTP_ERROR);
    CHECK(p.error == HTTP_ERR_CHUNK);
    CHECK(fed <= HTTP_MAX_HEAD + sizeof pad);
    http_parser_free(&p);
}

/* After a rare huge body or split head, the next response does not keep the
 * big buffers; small ones are kept for reuse. */
TEST(large_buffers_released_at_begin)
{
    enum { BIG = 200000 };
    char *in = xmalloc(BIG + 100);
    struct http_parser p;
    size_t used, len;
    len = (size_t)snprintf(in, 100, OK11 "Content-Length: %d\r\n\r\n", BIG);
    memset(in + len, 'b', BIG);
    len += BIG;
    http_parser_init(&p);
    p.want_head = p.want_body = true;
    CHECK(http_parse(&p, in, 10, &used) == HTTP_MORE);
    CHECK(http_parse(&p, in + 10, len - 10, &used) == HTTP_DONE);
    CHECK_U64(p.body.len, BIG);
    CHECK(p.body.cap >= BIG);
    CHECK(p._carry.cap > 0 && p.head.cap > 0);
    http_begin(&p, false);
    CHECK_U64(p.body.cap, 0);
    CHECK(p._carry.cap > 0 && p.head.cap > 0);
    http_parser_free(&p);
    free(in);
}

TEST(largest_chunk_size_is_accepted)
{
    static const char in[] = OK11 CHUNKED "\r\nffffffffffffffff;x\r\nabc";
    struct http_parser p;
    size_t used;
    http_parser_init(&p);
    CHECK(http_parse(&p, in, sizeof in - 1, &used) == HTTP_MORE);
    CHECK(http_eof(&p) == HTTP_ERROR);
    CHECK(p.error == HTTP_ERR_TRUNCATED);
    http_parser_free(&p);
}

/* ------------------------------------------------------------------------ */
/* http_head_fields, http_field_next                                         */
/* ------------------------------------------------------------------------ */

static void check_fields(const char *in, const char *const *want, size_t n)
{
    struct http_parser p;
    const char *fields, *name, *value;
    size_t used, len, pos = 0, name_len, value_len, i = 0;
    http_parser_init(&p);
    p.want_head = true;
    CHECK(http_parse(&p, in, strlen(in), &used) == HTTP_DONE);
    http_head_fields(&p.head, &fields, &len);
    while (http_field_next(fields, len, &pos, &name, &name_len, &value, &value_len)) {
        if (i + 1 >= 2 * n + 1) {
            UNIT_FAIL("more fields than expected in \"%s\"", in);
            break;
        }
        CHECK(name_len == strlen(want[i]) && memcmp(name, want[i], name_len) == 0);
        CHECK(value_len == strlen(want[i + 1]) && memcmp(value, want[i + 1], value_len) == 0);
        i += 2;
    }
    CHECK_U64(i, 2 * n);
    CHECK(!http_field_next(fields, len, &pos, &name, &name_len, &value, &value_len));
    http_parser_free(&p);
}

TEST(head_fields_trim_values)
{
    static const char *const want[] = {"Content-Length", "0", "X-Token", "a b  c",
                                       "Empty",          "",  "x-tab",   "v"};
    check_fields(OK11 "Content-Length: 0\r\nX-Token:   a b  c \t\r\nEmpty:\r\nx-tab:\tv\t\r\n\r\n",
                 want, 4);
}

TEST(head_fields_bare_lf_and_interim)
{
    static const char *const want[] = {"Content-Length", "0", "Set-Cookie", "a=1"};
    check_fields("HTTP/1.1 103 Early Hints\nLink: </x>\n\n"
                 "HTTP/1.1 200 OK\nContent-Length: 0\nSet-Cookie: a=1\n\n",
                 want, 2);
}

TEST(head_fields_without_fields)
{
    check_fields("HTTP/1.1 204 No Content\r\n\r\n", NULL, 0);
    struct buf empty = {0};
    const char *fields, *name, *value;
    size_t len, pos = 0, name_len, value_len;
    http_head_fields(&empty, &fields, &len);
    CHECK(fields == NULL && len == 0);
    CHECK(!http_field_next(fields, len, &pos, &name, &name_len, &value, &value_len));
}

/* ------------------------------------------------------------------------ */
/* Request verification                                                      */
/* ------------------------------------------------------------------------ */

static size_t req(const char *s, bool *heads, size_t heads_len, char *err)
{
    return http_request_parse(s, strlen(s), heads, heads_len, err, 128);
}

static void check_req_error(const char *s, const char *want)
{
    char err[128];
    bool heads[4];
    CHECK_U64(req(s, heads, 4, err), 0);
    CHECK_STR(err, want);
}

#define GET "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

TEST(request_single)
{
    char err[128];
    bool heads[2] = {true, true};
    CHECK_U64(req(GET, heads, 2, err), 1);
    CHECK(!heads[0]);
    CHECK(heads[1]); /* untouched */
    CHECK_STR(err, "");
}

TEST(request_pipelined_three)
{
    char err[128];
    bool heads[3];
    CHECK_U64(req(GET GET GET, heads, 3, err), 3);
    CHECK(!heads[0] && !heads[1] && !heads[2]);
}

TEST(request_head_marks)
{
    char err[128];
    bool heads[4] = {false};
    CHECK_U64(
        req(GET "HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n" GET "HEAD * HTTP/1.0\r\n\r\n", heads, 4, err),
        4);
    CHECK(!heads[0] && heads[1] && !heads[2] && heads[3]);
    /* Methods are case-sensitive (RFC 9110 §9.1): "head" is another method. */
    CHECK_U64(req("head / HTTP/1.1\r\n\r\n", heads, 4, err), 1);
    CHECK(!heads[0]);
}

TEST(request_heads_array_shorter_than_count)
{
    char err[128];
    bool heads[1];
    CHECK_U64(req("HEAD / HTTP/1.1\r\n\r\n" GET GET, heads, 1, err), 3);
    CHECK(heads[0]);
    CHECK_U64(req(GET GET, NULL, 0, err), 2);
    CHECK_U64(http_request_parse(GET, strlen(GET), NULL, 0, NULL, 0), 1);
}

TEST(request_post_with_body)
{
    char err[128];
    bool heads[2];
    CHECK_U64(req("POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                  "Content-Length: 11\r\n\r\nhello\r\n\r\nxy" GET,
                  heads, 2, err),
              2);
    CHECK_STR(err, "");
    CHECK_U64(req("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n" GET, heads, 2, err), 2);
}

TEST(request_chunked_body)
{
    char err[128];
    bool heads[2];
    CHECK_U64(req("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                  "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nChecksum: x\r\n\r\n" GET,
                  heads, 2, err),
              2);
    CHECK_STR(err, "");
    CHECK_U64(req("POST / HTTP/1.1\nTransfer-Encoding: chunked\n\n1\nx\n0\n\n", heads, 2, err), 1);
}

TEST(request_bare_lf_and_blank_lines)
{
    char err[128];
    bool heads[2];
    CHECK_U64(req("GET / HTTP/1.1\nHost: x\n\n", heads, 2, err), 1);
    /* Empty lines between requests are ignored (RFC 9112 §2.2), as wrk does. */
    CHECK_U64(req("\r\n" GET "\r\n\n" GET "\r\n", heads, 2, err), 2);
}

TEST(request_incomplete)
{
    check_req_error("GET / HTTP/1.1\r\nHost: x\r\n", "incomplete request at 3:1");
    check_req_error("", "incomplete request at 1:1");
    check_req_error("\r\n", "incomplete request at 2:1");
    check_req_error("GET / HTTP/1.1", "incomplete request at 1:15");
    check_req_error("GET / HTTP/1.1\r", "incomplete request at 1:16");
    check_req_error("GET / HTTP/1.1\r\nHost: x\r\n\r", "incomplete request at 3:2");
    check_req_error("GET", "incomplete request at 1:4");
    check_req_error("GET / HTTP/1.1\r\nHost", "incomplete request at 2:5");
    check_req_error("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
                    "incomplete request at 4:4");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
                    "incomplete request at 5:4");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc",
                    "incomplete request at 5:4");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n",
                    "incomplete request at 7:1");
}

TEST(request_trailing_partial)
{
    check_req_error(GET GET "GET / HT", "incomplete request at 7:9");
    check_req_error(GET "G", "incomplete request at 4:2");
    check_req_error(GET "\r\n\r\nx", "incomplete request at 6:2");
}

TEST(request_garbage)
{
    check_req_error("G@T / HTTP/1.1\r\n\r\n", "invalid HTTP method at 1:2");
    check_req_error("garbage\r\n\r\n", "invalid HTTP method at 1:8");
    check_req_error("\x01\x02\x03", "invalid HTTP method at 1:1");
    check_req_error(" GET / HTTP/1.1\r\n\r\n", "invalid HTTP method at 1:1");
    check_req_error(GET "{\"json\": 1}", "invalid HTTP method at 4:1");
    check_req_error("GET  HTTP/1.1\r\n\r\n", "invalid request target at 1:5");
    check_req_error("GET /\r\n\r\n", "invalid request target at 1:6");
    check_req_error("GET /a\x7f HTTP/1.1\r\n\r\n", "invalid request target at 1:7");
    check_req_error("GET / HTTP/2.0\r\n\r\n", "invalid HTTP version at 1:12");
    check_req_error("GET / http/1.1\r\n\r\n", "invalid HTTP version at 1:7");
    check_req_error("GET / HTTP/1.x\r\n\r\n", "invalid HTTP version at 1:14");
    check_req_error("GET / HTTP/1.1 \r\n\r\n", "invalid HTTP version at 1:15");
    check_req_error("GET / HTTP/1.1\rx\n\r\n", "invalid HTTP version at 1:15");
}

TEST(request_bad_header_fields)
{
    check_req_error("GET / HTTP/1.1\r\nNoColon\r\n\r\n", "invalid header field at 2:8");
    check_req_error("GET / HTTP/1.1\r\n: x\r\n\r\n", "invalid header field at 2:1");
    check_req_error("GET / HTTP/1.1\r\nHost : x\r\n\r\n", "invalid header field at 2:5");
    check_req_error("GET / HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n", "invalid header field at 3:1");
    check_req_error("GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", "invalid header field at 2:5");
    check_req_error("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", "invalid header field at 2:5");
}

TEST(request_bad_framing)
{
    check_req_error("POST / HTTP/1.1\r\nContent-Length: x1\r\n\r\n",
                    "invalid Content-Length at 2:17");
    check_req_error("POST / HTTP/1.1\r\nContent-Length:  \r\n\r\n",
                    "invalid Content-Length at 2:18");
    check_req_error("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
                    "invalid Content-Length at 2:17");
    check_req_error("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                    "invalid Content-Length at 3:17");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
                    "invalid Transfer-Encoding at 2:20");
    check_req_error("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "0\r\n\r\n",
                    "Content-Length with Transfer-Encoding at 2:17");
    check_req_error("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                    "Transfer-Encoding: chunked without a chunked body at 2:20");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n",
                    "invalid chunk size at 4:1");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1 x\r\n",
                    "invalid chunk size at 4:3");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "10000000000000000\r\n",
                    "invalid chunk size at 4:17");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
                    "expected CRLF after chunk data at 5:2");
    check_req_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad\r\n\r\n",
                    "invalid header field at 5:4");
}

TEST(request_error_message_truncated_safely)
{
    char err[8];
    CHECK_U64(http_request_parse("x", 1, NULL, 0, err, sizeof err), 0);
    CHECK_STR(err, "incompl");
}

/* ------------------------------------------------------------------------ */
/* The slices of accepted request bytes                                      */
/* ------------------------------------------------------------------------ */

static bool slice_is(const char *p, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(p, want, n) == 0;
}

TEST(request_next_gives_each_requests_slices)
{
    static const char in[] = "\r\nGET /a?b HTTP/1.1\r\nHost: h\r\nX:  v  \r\n\r\n"
                             "POST /p HTTP/1.0\nContent-Length: 3\n\nabc"
                             "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "2;x=y\r\nhi\r\n1\r\n!\r\n0\r\nT: 1\r\n\r\n"
                             "GET / HTTP/1.1\r\n\r\n\r\n";
    struct http_request_info ri;
    const char *name, *value;
    size_t pos = 0, fpos = 0, name_len, value_len, len = sizeof in - 1;
    char out[64];
    bool trailers;

    CHECK(http_request_next(in, len, &pos, &ri));
    CHECK(slice_is(ri.method, ri.method_len, "GET") && slice_is(ri.target, ri.target_len, "/a?b"));
    CHECK(slice_is(ri.fields, ri.fields_len, "Host: h\r\nX:  v  \r\n"));
    CHECK(ri.body_len == 0 && !ri.chunked);
    CHECK(http_field_next(ri.fields, ri.fields_len, &fpos, &name, &name_len, &value, &value_len));
    CHECK(slice_is(name, name_len, "Host") && slice_is(value, value_len, "h"));
    CHECK(http_field_next(ri.fields, ri.fields_len, &fpos, &name, &name_len, &value, &value_len));
    CHECK(slice_is(name, name_len, "X") && slice_is(value, value_len, "v"));
    CHECK(!http_field_next(ri.fields, ri.fields_len, &fpos, &name, &name_len, &value, &value_len));

    CHECK(http_request_next(in, len, &pos, &ri));
    CHECK(slice_is(ri.method, ri.method_len, "POST"));
    CHECK(slice_is(ri.fields, ri.fields_len, "Content-Length: 3\n"));
    CHECK(slice_is(ri.body, ri.body_len, "abc") && !ri.chunked);

    CHECK(http_request_next(in, len, &pos, &ri));
    CHECK(ri.chunked &&
          slice_is(ri.body, ri.body_len, "2;x=y\r\nhi\r\n1\r\n!\r\n0\r\nT: 1\r\n\r\n"));
    CHECK_U64(http_request_dechunk(&ri, NULL, &trailers), 3);
    CHECK(trailers);
    CHECK_U64(http_request_dechunk(&ri, out, &trailers), 3);
    CHECK(memcmp(out, "hi!", 3) == 0);

    CHECK(http_request_next(in, len, &pos, &ri));
    CHECK(ri.fields_len == 0 && ri.body_len == 0);
    CHECK(!http_request_next(in, len, &pos, &ri));
    CHECK_U64(pos, len - 2); /* the trailing empty line belongs to no request */
}

TEST(request_dechunk_without_trailers)
{
    static const char in[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    struct http_request_info ri;
    size_t pos = 0;
    bool trailers = true;
    CHECK(http_request_next(in, sizeof in - 1, &pos, &ri));
    CHECK_U64(http_request_dechunk(&ri, NULL, &trailers), 0);
    CHECK(!trailers);
}

TEST(list_has_a_token)
{
    CHECK(http_list_has("close, X-Hop", 12, "x-hop", 5));
    CHECK(http_list_has(" ,trailers ,", 12, "TRAILERS", 8));
    CHECK(!http_list_has("gzip;q=1, trailersx", 19, "trailers", 8));
    CHECK(!http_list_has("", 0, "close", 5));
}
