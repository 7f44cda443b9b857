/* HTTP/1.1 request bytes as HTTP/2 header lists and bodies (RFC 9113 §8.2.2,
 * §8.3.1), which HTTP/3 takes as they are (RFC 9114 §4.2, §4.3.1): the request
 * line becomes the pseudo-header fields, Host becomes :authority,
 * connection-specific fields are dropped and names lower-cased.
 *
 * The same walk over the batch runs twice: first it only measures (how many
 * header fields, how many bytes to copy) and finds what cannot be sent, then
 * it fills storage of exactly that size, so no pointer it hands out moves.
 * SPDX-License-Identifier: MIT */
#include "h2req.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "http_request.h"
#include "request.h"
#include "xalloc.h"

#define NAME_EQ(s, n, lit) ((n) == sizeof(lit) - 1 && strncasecmp((s), (lit), (n)) == 0)
#define LIT(s) s, sizeof(s) - 1

/* Measuring while nv is NULL, filling after. */
struct builder {
    nghttp2_nv *nv;
    size_t nnv;
    char *copy;
    size_t ncopy;
    size_t index, count; /* the request being converted (from 1), of count */
    const char *proto;   /* "HTTP/2" or "HTTP/3", for the messages */
    char *err;
    size_t err_len;
};

/* What the request line and Host say of the target (RFC 9113 §8.3.1). */
struct target {
    const char *scheme, *authority, *path;
    size_t scheme_len, authority_len, path_len;
};

/* A header field line of a request. */
struct field {
    const char *name, *value;
    size_t name_len, value_len;
};

static bool next_field(const struct http_request_info *ri, size_t *pos, struct field *f)
{
    return http_field_next(ri->fields, ri->fields_len, pos, &f->name, &f->name_len, &f->value,
                           &f->value_len);
}

static bool fail(struct builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(struct builder *b, const char *fmt, ...)
{
    size_t n = 0;
    if (!b->err || !b->err_len)
        return false;
    if (b->count > 1)
        n = (size_t)snprintf(b->err, b->err_len, "request %zu of %zu: ", b->index, b->count);
    if (n < b->err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err + n, b->err_len - n, fmt, ap);
        va_end(ap);
    }
    return false;
}

static void emit(struct builder *b, const char *name, size_t name_len, const char *value,
                 size_t value_len)
{
    if (b->nv)
        b->nv[b->nnv] = (nghttp2_nv){
            .name = (uint8_t *)name,
            .value = (uint8_t *)value,
            .namelen = name_len,
            .valuelen = value_len,
            .flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE,
        };
    b->nnv++;
}

/* n bytes of the copy storage; NULL while measuring. */
static char *take(struct builder *b, size_t n)
{
    char *p = b->copy ? b->copy + b->ncopy : NULL;
    b->ncopy += n;
    return p;
}

/* HTTP/2 field names are lower case (RFC 9113 §8.2.1); a copy only when needed. */
static const char *lower_name(struct builder *b, const char *name, size_t n)
{
    size_t i = 0;
    while (i < n && !(name[i] >= 'A' && name[i] <= 'Z'))
        i++;
    if (i == n)
        return name;
    char *d = take(b, n);
    if (d)
        for (i = 0; i < n; i++)
            d[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] + ('a' - 'A')) : name[i];
    return d;
}

static void emit_length(struct builder *b, size_t len)
{
    char digits[24];
    size_t n = (size_t)snprintf(digits, sizeof digits, "%zu", len);
    char *d = take(b, n);
    if (d)
        memcpy(d, digits, n);
    emit(b, LIT("content-length"), d, n);
}

static bool has_prefix(const char *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && strncasecmp(s, prefix, k) == 0;
}

/* "http://host/p?q" or "https://...": proxies' absolute form (RFC 9112
 * §3.2.2) carries its own scheme and authority, and the Host field yields. */
static bool absolute_target(struct builder *b, const char *s, size_t n, struct target *t)
{
    size_t i = has_prefix(s, n, "http://") ? 7 : has_prefix(s, n, "https://") ? 8 : 0;
    if (i == 0)
        return false;
    t->scheme = i == 7 ? "http" : "https";
    t->scheme_len = i - 3;
    t->authority = s + i;
    while (i < n && s[i] != '/' && s[i] != '?' && s[i] != '#')
        i++;
    t->authority_len = (size_t)(s + i - t->authority);
    if (i < n && s[i] == '/') {
        t->path = s + i;
        t->path_len = n - i;
    } else { /* nothing or "?q" after the authority: the path is "/" */
        char *d = i < n ? take(b, n - i + 1) : NULL;
        if (d) {
            d[0] = '/';
            memcpy(d + 1, s + i, n - i);
        }
        t->path = i < n ? d : "/";
        t->path_len = n - i + 1;
    }
    return true;
}

static bool check_authority(struct builder *b, const char *what, const char *s, size_t n)
{
    if (n == 0)
        return fail(b, "empty %s: %s needs an :authority", what, b->proto);
    if (memchr(s, '@', n))
        return fail(b, "%s '%.*s' has user information, which %s forbids", what, (int)n, s,
                    b->proto);
    if (!nghttp2_check_authority((const uint8_t *)s, n))
        return fail(b, "%s '%.*s' is not a valid :authority", what, (int)n, s);
    return true;
}

/* The request checker let no space or control into the target, which is all
 * nghttp2_check_path() would refuse in a :path. */
static bool request_target(struct builder *b, const struct http_request_info *ri, bool tls,
                           struct target *t)
{
    const char *s = ri->target;
    size_t n = ri->target_len;
    *t = (struct target){.scheme = tls ? "https" : "http", .scheme_len = tls ? 5 : 4};
    if (NAME_EQ(ri->method, ri->method_len, "CONNECT"))
        return fail(b, "CONNECT opens a tunnel; volley cannot send it over %s", b->proto);
    if (s[0] == '/' || (n == 1 && s[0] == '*')) {
        if (s[0] == '*' && !(ri->method_len == 7 && memcmp(ri->method, "OPTIONS", 7) == 0))
            return fail(b, "request target * is for OPTIONS only");
        t->path = s;
        t->path_len = n;
        return true;
    }
    if (!absolute_target(b, s, n, t))
        return fail(b, "request target '%.*s' is neither a path, * nor an http(s) URL", (int)n, s);
    return check_authority(b, "authority in the request target", t->authority, t->authority_len);
}

/* Without an authority in the target, the Host field gives it: exactly one. */
static bool host(struct builder *b, const struct http_request_info *ri, struct target *t)
{
    struct field f;
    size_t pos = 0, hosts = 0;
    while (next_field(ri, &pos, &f)) {
        if (!NAME_EQ(f.name, f.name_len, "host") || ++hosts > 1 || t->authority)
            continue;
        if (!check_authority(b, "Host", f.value, f.value_len))
            return false;
        t->authority = f.value;
        t->authority_len = f.value_len;
    }
    if (hosts > 1)
        return fail(b, "%zu Host header fields (%s has one :authority)", hosts, b->proto);
    if (!t->authority)
        return fail(b, "no Host header field: %s needs an :authority", b->proto);
    return true;
}

/* RFC 9113 §8.2.2: fields that only make sense on one HTTP/1.1 connection,
 * and those a Connection field names (RFC 9110 §7.6.1). */
static bool connection_specific(const struct http_request_info *ri, const char *name, size_t n)
{
    static const char *const hop[] = {"connection", "keep-alive", "proxy-connection",
                                      "transfer-encoding", "upgrade"};
    struct field f;
    size_t pos = 0;
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        if (n == strlen(hop[i]) && strncasecmp(name, hop[i], n) == 0)
            return true;
    while (next_field(ri, &pos, &f))
        if (NAME_EQ(f.name, f.name_len, "connection") &&
            http_list_has(f.value, f.value_len, name, n))
            return true;
    return false;
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return n > 0;
}

/* The fields after the pseudo-header fields, in their order. Content-Length
 * goes once, as plain digits (a list "5, 5" is HTTP/1.1 only); a chunked
 * body, sent de-chunked, gets one. TE stays only as "trailers". */
static void fields(struct builder *b, const struct http_request_info *ri, size_t body_len)
{
    struct field f;
    size_t pos = 0;
    bool length = false;
    while (next_field(ri, &pos, &f)) {
        if (NAME_EQ(f.name, f.name_len, "host"))
            continue;
        /* TE is connection-specific too, but HTTP/2 keeps "trailers". */
        if (NAME_EQ(f.name, f.name_len, "te")) {
            if (http_list_has(f.value, f.value_len, LIT("trailers")))
                emit(b, LIT("te"), LIT("trailers"));
        } else if (NAME_EQ(f.name, f.name_len, "content-length")) {
            if (length)
                continue;
            length = true;
            if (all_digits(f.value, f.value_len))
                emit(b, LIT("content-length"), f.value, f.value_len);
            else
                emit_length(b, body_len);
        } else if (!connection_specific(ri, f.name, f.name_len)) {
            emit(b, lower_name(b, f.name, f.name_len), f.name_len, f.value, f.value_len);
        }
    }
    if (ri->chunked)
        emit_length(b, body_len);
}

/* The body as DATA will carry it: Content-Length framed bytes in place, a
 * chunked body copied without its framing. Trailer fields would need a
 * trailing HEADERS frame, which volley does not send. */
static bool body(struct builder *b, const struct http_request_info *ri, const char **data,
                 size_t *len)
{
    bool trailers;
    if (!ri->chunked) {
        *data = ri->body_len ? ri->body : NULL;
        *len = ri->body_len;
        return true;
    }
    *len = http_request_dechunk(ri, NULL, &trailers);
    if (trailers)
        return fail(b, "a chunked body with trailer fields cannot be sent over %s", b->proto);
    char *d = *len ? take(b, *len) : NULL;
    if (d)
        http_request_dechunk(ri, d, &trailers);
    *data = *len ? d : NULL;
    return true;
}

static bool convert(struct builder *b, const struct http_request_info *ri, bool tls,
                    struct h2req_msg *m)
{
    struct target t;
    size_t first = b->nnv;
    if (!request_target(b, ri, tls, &t) || !host(b, ri, &t) || !body(b, ri, &m->body, &m->body_len))
        return false;
    emit(b, LIT(":method"), ri->method, ri->method_len);
    emit(b, LIT(":scheme"), t.scheme, t.scheme_len);
    emit(b, LIT(":authority"), t.authority, t.authority_len);
    emit(b, LIT(":path"), t.path, t.path_len);
    fields(b, ri, m->body_len);
    m->nv = b->nv ? b->nv + first : NULL;
    m->nvlen = b->nnv - first;
    m->head = ri->method_len == 4 && memcmp(ri->method, "HEAD", 4) == 0;
    return true;
}

/* msgs: where the messages go, or NULL while measuring. */
static bool walk(struct builder *b, const struct request *r, bool tls, struct h2req_msg *msgs)
{
    struct http_request_info ri;
    struct h2req_msg m;
    size_t pos = 0;
    b->count = r->depth;
    for (b->index = 1; http_request_next(r->data, r->len, &pos, &ri); b->index++) {
        if (!convert(b, &ri, tls, &m))
            return false;
        if (msgs)
            msgs[b->index - 1] = m;
    }
    return true;
}

/* Storage of at least n elements; what it held is not kept. */
static void *reserve(void *p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return p;
    free(p);
    *cap = n;
    return xmalloc(n * size);
}

bool h2req_build(struct h2req *h, const struct request *r, bool tls, char *err, size_t err_len)
{
    return h2req_build_for(h, r, tls, "HTTP/2", err, err_len);
}

bool h2req_build_for(struct h2req *h, const struct request *r, bool tls, const char *proto,
                     char *err, size_t err_len)
{
    struct builder measure = {.proto = proto, .err = err, .err_len = err_len};
    if (err && err_len)
        err[0] = '\0';
    h->count = 0;
    if (!walk(&measure, r, tls, NULL))
        return false;
    h->msgs = reserve(h->msgs, &h->_msgs_cap, r->depth, sizeof *h->msgs);
    h->_nv = reserve(h->_nv, &h->_nv_cap, measure.nnv, sizeof *h->_nv);
    h->_copy = reserve(h->_copy, &h->_copy_cap, measure.ncopy, 1);
    struct builder fill = {.nv = h->_nv, .copy = h->_copy, .proto = proto};
    walk(&fill, r, tls, h->msgs);
    h->count = r->depth;
    return true;
}

bool h2req_fits(const struct h2req *h, char *err, size_t err_len)
{
    nghttp2_hd_deflater *deflater;
    if (nghttp2_hd_deflate_new(&deflater, 4096) != 0)
        die("out of memory");
    bool fits = true;
    for (size_t i = 0; i < h->count && fits; i++) {
        /* nghttp2 measures a request's HEADERS with room for a priority. */
        size_t n = nghttp2_hd_deflate_bound(deflater, h->msgs[i].nv, h->msgs[i].nvlen) + 5;
        if (n > H2REQ_BLOCK_MAX) {
            struct builder b = {.index = i + 1, .count = h->count, .err = err, .err_len = err_len};
            fits = fail(&b, "its header fields take up to %zu bytes, over nghttp2's limit of %d", n,
                        H2REQ_BLOCK_MAX);
        }
    }
    nghttp2_hd_deflate_del(deflater);
    return fits;
}

void h2req_free(struct h2req *h)
{
    free(h->msgs);
    free(h->_nv);
    free(h->_copy);
    memset(h, 0, sizeof *h);
}

/* ------------------------------------------------------------------------ */
/* The batches of sessions that keep requests in flight                     */
/* ------------------------------------------------------------------------ */

const struct h2req *h2req_static(struct h2req_static *s, const struct request *r, bool tls,
                                 const char *proto)
{
    char err[256];
    if (s->req != r || s->data != r->data || s->len != r->len) {
        if (!h2req_build_for(&s->conv, r, tls, proto, err, sizeof err))
            die("the request cannot be sent over %s: %s", proto, err);
        s->req = r;
        s->data = r->data;
        s->len = r->len;
    }
    return &s->conv;
}

bool h2req_batch_set(struct h2req_batch *b, const struct request *r, bool tls, const char *proto)
{
    char err[256];
    if (b->valid && b->req.len == r->len && memcmp(b->req.data, r->data, r->len) == 0)
        return false;
    b->valid = false;
    if (r->len + 1 > b->req.cap) {
        b->req.cap = r->len + 1;
        b->req.data = xrealloc(b->req.data, b->req.cap);
    }
    memcpy(b->req.data, r->data, r->len);
    b->req.data[r->len] = '\0';
    b->req.len = r->len;
    /* HTTP/1.1 sends what request() returns as it is; HTTP/2 and HTTP/3 must
     * read it. */
    size_t n = http_request_parse(b->req.data, r->len, NULL, 0, err, sizeof err);
    if (n == 0)
        die("request() returned a malformed request: %s", err);
    if (n != r->depth)
        die("request() returned %zu requests where its first call returned %zu: over %s "
            "every call must return as many",
            n, r->depth, proto);
    b->req.depth = n;
    if (!h2req_build_for(&b->conv, &b->req, tls, proto, err, sizeof err))
        die("request() returned a request %s cannot carry: %s", proto, err);
    b->valid = true;
    return true;
}

void h2req_batch_free(struct h2req_batch *b)
{
    request_free(&b->req);
    h2req_free(&b->conv);
}

void h2req_static_free(struct h2req_static *s) { h2req_free(&s->conv); }
