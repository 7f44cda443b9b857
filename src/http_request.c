/* Checking the request bytes a script produces (what request() returns, or
 * wrk.format's), as wrk verifies them: each request whole, with its framing,
 * and how many there are in a pipelined batch; and reading them back, one
 * request at a time, for HTTP/2, which sends their parts as frames.
 * SPDX-License-Identifier: MIT */
#include "http_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chars.h"
#include "http_syntax.h"

/* The whole request string is at hand, so this parser needs no carry: it walks
 * the bytes once and remembers the offset of the first offending byte. */
struct rq {
    const char *buf;
    size_t len, off;
    size_t err_at;
    const char *err;
};

/* A line: content [start, end) without its CRLF or LF; next is where the
 * following line starts. Incomplete when the input ends before the LF. */
struct rq_line {
    size_t start, end, next;
    bool complete;
};

struct rq_head {
    bool has_length, has_te, chunked;
    uint64_t length;
    size_t length_at, te_at;
};

static void rq_line(const struct rq *r, struct rq_line *l)
{
    const char *nl = http_find(r->buf + r->off, r->len - r->off, '\n');
    l->start = r->off;
    l->complete = nl != NULL;
    l->end = nl ? (size_t)(nl - r->buf) : r->len;
    l->next = nl ? l->end + 1 : r->len;
    if (l->end > l->start && r->buf[l->end - 1] == '\r')
        l->end--;
}

static bool rq_error(struct rq *r, size_t at, const char *what)
{
    r->err_at = at;
    r->err = what;
    return false;
}

static bool rq_incomplete(struct rq *r) { return rq_error(r, r->len, "incomplete request"); }

/* A byte at `at` did not fit; reaching the end of a line the input cut short
 * means more bytes were needed, not that they were wrong. */
static bool rq_bad(struct rq *r, const struct rq_line *l, size_t at, const char *what)
{
    if (at >= l->end && !l->complete)
        return rq_incomplete(r);
    return rq_error(r, at, what);
}

static size_t span_token(const char *b, size_t i, size_t end)
{
    while (i < end && http_tchar[(unsigned char)b[i]])
        i++;
    return i;
}

/* RFC 9112 §3: request-line = method SP request-target SP HTTP-version. */
static bool rq_request_line(struct rq *r, bool *is_head)
{
    static const char version[] = "HTTP/1.";
    const char *b = r->buf;
    struct rq_line l;
    rq_line(r, &l);
    size_t i = span_token(b, l.start, l.end);
    if (i == l.start || i == l.end || b[i] != ' ')
        return rq_bad(r, &l, i, "invalid HTTP method");
    *is_head = i - l.start == 4 && memcmp(b + l.start, "HEAD", 4) == 0;
    size_t target = ++i;
    while (i < l.end && (unsigned char)b[i] > ' ' && b[i] != 0x7f)
        i++;
    if (i == target || i == l.end || b[i] != ' ')
        return rq_bad(r, &l, i, "invalid request target");
    i++;
    for (size_t k = 0; k < sizeof version - 1; k++, i++)
        if (i >= l.end || b[i] != version[k])
            return rq_bad(r, &l, i, "invalid HTTP version");
    if (i >= l.end || b[i] < '0' || b[i] > '9')
        return rq_bad(r, &l, i, "invalid HTTP version");
    if (++i != l.end || !l.complete)
        return rq_bad(r, &l, i, "invalid HTTP version");
    r->off = l.next;
    return true;
}

/* Field values: HTAB, SP, VCHAR and obs-text (RFC 9110 §5.5); no controls. */
static bool field_char(unsigned char c) { return c == '\t' || (c >= ' ' && c != 0x7f); }

static bool rq_framing_field(struct rq *r, struct rq_head *h, const char *name, size_t name_len,
                             size_t at, size_t end)
{
    const char *v = r->buf + at;
    size_t vn = end - at;
    http_trim(&v, &vn);
    at = (size_t)(v - r->buf);
    if (HTTP_TOKEN_EQ(name, name_len, "content-length")) {
        uint64_t n;
        if (!http_parse_length(v, vn, &n) || (h->has_length && n != h->length))
            return rq_error(r, at, "invalid Content-Length");
        h->has_length = true;
        h->length = n;
        h->length_at = at;
    } else if (HTTP_TOKEN_EQ(name, name_len, "transfer-encoding")) {
        int c = http_final_chunked(v, vn);
        h->has_te = true;
        h->te_at = at;
        if (c >= 0)
            h->chunked = c;
    }
    return true;
}

static bool rq_field_line(struct rq *r, const struct rq_line *l, struct rq_head *h)
{
    const char *b = r->buf;
    size_t i = span_token(b, l->start, l->end);
    if (i == l->start || i == l->end || b[i] != ':')
        return rq_bad(r, l, i, "invalid header field");
    size_t value = i + 1;
    for (i = value; i < l->end; i++)
        if (!field_char((unsigned char)b[i]))
            return rq_error(r, i, "invalid header field");
    if (!l->complete)
        return rq_incomplete(r);
    /* Trailer fields (h == NULL) cannot change the framing. */
    return !h || rq_framing_field(r, h, b + l->start, value - 1 - l->start, value, l->end);
}

/* Field lines up to and including the blank line. */
static bool rq_fields(struct rq *r, struct rq_head *h)
{
    for (;;) {
        struct rq_line l;
        rq_line(r, &l);
        if (l.end == l.start) {
            if (!l.complete)
                return rq_incomplete(r);
            r->off = l.next;
            return true;
        }
        if (!rq_field_line(r, &l, h))
            return false;
        r->off = l.next;
    }
}

static bool rq_chunk_size(struct rq *r, uint64_t *size)
{
    const char *b = r->buf;
    struct rq_line l;
    rq_line(r, &l);
    size_t i = l.start;
    int d;
    *size = 0;
    for (; i < l.end && (d = hex_digit(b[i])) >= 0; i++) {
        if (*size > UINT64_MAX >> 4)
            return rq_error(r, i, "invalid chunk size");
        *size = *size << 4 | (uint64_t)d;
    }
    if (i == l.start)
        return rq_bad(r, &l, i, "invalid chunk size");
    while (i < l.end && http_is_ows(b[i]))
        i++;
    if (i < l.end && b[i] != ';')
        return rq_error(r, i, "invalid chunk size");
    if (!l.complete)
        return rq_incomplete(r);
    r->off = l.next;
    return true;
}

/* RFC 9112 §7.1: chunk data is followed by CRLF (a bare LF is accepted). */
static bool rq_chunk_end(struct rq *r)
{
    size_t i = r->off;
    if (i < r->len && r->buf[i] == '\r')
        i++;
    if (i == r->len)
        return rq_incomplete(r);
    if (r->buf[i] != '\n')
        return rq_error(r, i, "expected CRLF after chunk data");
    r->off = i + 1;
    return true;
}

static bool rq_chunked(struct rq *r)
{
    for (;;) {
        uint64_t size;
        if (!rq_chunk_size(r, &size))
            return false;
        if (size == 0)
            return rq_fields(r, NULL);
        if (size > r->len - r->off)
            return rq_incomplete(r);
        r->off += (size_t)size;
        if (!rq_chunk_end(r))
            return false;
    }
}

/* RFC 9112 §6.3 items 4-7 for requests: a Transfer-Encoding whose final coding
 * is not chunked cannot be framed, and one beside Content-Length is refused as
 * a request smuggling pattern; without either there is no body. */
static bool rq_body(struct rq *r, const struct rq_head *h)
{
    if (h->has_te) {
        if (!h->chunked)
            return rq_error(r, h->te_at, "invalid Transfer-Encoding");
        if (h->has_length)
            return rq_error(r, h->length_at, "Content-Length with Transfer-Encoding");
        /* The usual cause: a Transfer-Encoding header added by hand
         * (-H, wrk.headers) to a request whose body was not encoded. */
        if (r->off == r->len)
            return rq_error(r, h->te_at, "Transfer-Encoding: chunked without a chunked body");
        return rq_chunked(r);
    }
    if (h->has_length) {
        if (h->length > r->len - r->off)
            return rq_incomplete(r);
        r->off += (size_t)h->length;
    }
    return true;
}

/* The slices of a request that parsed: its request line at `line`, its field
 * lines at `fields`, its body from `body` to r->off. */
static void rq_info(const struct rq *r, const struct rq_head *h, size_t line, size_t fields,
                    size_t body, struct http_request_info *info)
{
    const char *b = r->buf;
    const char *sp = memchr(b + line, ' ', fields - line);
    info->method = b + line;
    info->method_len = (size_t)(sp - info->method);
    info->target = sp + 1;
    sp = memchr(info->target, ' ', (size_t)(b + fields - info->target));
    info->target_len = (size_t)(sp - info->target);
    info->fields = b + fields;
    /* Less the blank line, which ends in LF or CRLF. */
    info->fields_len = body - fields - (body - fields >= 2 && b[body - 2] == '\r' ? 2 : 1);
    info->body = b + body;
    info->body_len = r->off - body;
    info->chunked = h->has_te;
}

/* info: where its parts lie, or NULL. */
static bool rq_request(struct rq *r, bool *is_head, struct http_request_info *info)
{
    struct rq_head h = {0};
    size_t line = r->off, fields, body;
    if (!rq_request_line(r, is_head))
        return false;
    fields = r->off;
    if (!rq_fields(r, &h))
        return false;
    body = r->off;
    if (!rq_body(r, &h))
        return false;
    if (info)
        rq_info(r, &h, line, fields, body, info);
    return true;
}

/* RFC 9112 §2.2: empty lines before a request line are ignored, as wrk's
 * parser does, so a trailing CRLF after the last request is harmless. */
static void rq_skip_empty_lines(struct rq *r)
{
    while (r->off < r->len) {
        if (r->buf[r->off] == '\n')
            r->off++;
        else if (r->buf[r->off] == '\r' && r->off + 1 < r->len && r->buf[r->off + 1] == '\n')
            r->off += 2;
        else
            break;
    }
}

/* wrk's "<description> at <line>:<column>", both 1-based, lines counted by LF. */
static void rq_report(const struct rq *r, char *err, size_t err_len)
{
    size_t line = 1, line_start = 0;
    if (!err || !err_len)
        return;
    for (size_t i = 0; i < r->err_at; i++)
        if (r->buf[i] == '\n') {
            line++;
            line_start = i + 1;
        }
    snprintf(err, err_len, "%s at %zu:%zu", r->err, line, r->err_at - line_start + 1);
}

size_t http_request_parse(const char *buf, size_t len, bool *heads, size_t heads_len, char *err,
                          size_t err_len)
{
    struct rq r = {.buf = buf, .len = len};
    size_t count = 0;
    if (err && err_len)
        err[0] = '\0';
    for (;;) {
        bool is_head = false;
        rq_skip_empty_lines(&r);
        if (r.off == len && count > 0)
            return count;
        if (!rq_request(&r, &is_head, NULL)) {
            rq_report(&r, err, err_len);
            return 0;
        }
        if (heads && count < heads_len)
            heads[count] = is_head;
        count++;
    }
}

size_t http_request_prefix(const char *buf, size_t len, size_t n)
{
    struct rq r = {.buf = buf, .len = len};
    bool is_head;
    for (size_t i = 0; i < n && r.off < len; i++) {
        rq_skip_empty_lines(&r);
        if (!rq_request(&r, &is_head, NULL))
            break;
    }
    return r.off;
}

bool http_request_next(const char *buf, size_t len, size_t *pos, struct http_request_info *info)
{
    struct rq r = {.buf = buf, .len = len, .off = *pos};
    bool is_head;
    rq_skip_empty_lines(&r);
    if (r.off >= len || !rq_request(&r, &is_head, info))
        return false;
    *pos = r.off;
    return true;
}

size_t http_request_dechunk(const struct http_request_info *info, char *out, bool *trailers)
{
    struct rq r = {.buf = info->body, .len = info->body_len};
    size_t n = 0;
    uint64_t size;
    *trailers = false;
    while (rq_chunk_size(&r, &size) && size > 0) {
        if (out)
            memcpy(out + n, r.buf + r.off, (size_t)size);
        n += (size_t)size;
        r.off += (size_t)size;
        if (!rq_chunk_end(&r))
            break;
    }
    /* After the last chunk: the trailer section, then the blank line. */
    *trailers = r.off < r.len && r.buf[r.off] != '\r' && r.buf[r.off] != '\n';
    return n;
}
