/* HTTP/1.1 message framing (RFC 9112): the incremental response parser that
 * finds where each response ends in a byte stream arriving in arbitrary pieces,
 * and the checker for the request bytes a script produces.
 * SPDX-License-Identifier: MIT */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chars.h"

/* ------------------------------------------------------------------------ */
/* Shared helpers                                                           */
/* ------------------------------------------------------------------------ */

/* RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-"
 * / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA */
static const unsigned char tchar[256] = {
    ['0' ... '9'] = 1, ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['!'] = 1, ['#'] = 1, ['$'] = 1,
    ['%'] = 1,         ['&'] = 1,         ['\''] = 1,        ['*'] = 1, ['+'] = 1, ['-'] = 1,
    ['.'] = 1,         ['^'] = 1,         ['_'] = 1,         ['`'] = 1, ['|'] = 1, ['~'] = 1,
};

#define TOKEN_EQ(s, n, lit) ((n) == sizeof(lit) - 1 && strncasecmp((s), (lit), (n)) == 0)

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

/* memchr that accepts an empty range at a NULL pointer. */
static const char *find(const char *s, size_t n, int c) { return n ? memchr(s, c, n) : NULL; }

static void trim(const char **s, size_t *n)
{
    while (*n && is_ows(**s))
        (*s)++, (*n)--;
    while (*n && is_ows((*s)[*n - 1]))
        (*n)--;
}

/* Buffers a rare large head or body grew are given back past this. */
#define KEEP_BUFFER (64 * 1024)

/* A cursor over a comma-separated list (RFC 9110 §5.6.1). Empty elements are
 * returned too: Content-Length treats them as errors, the others skip them. */
struct list {
    const char *p, *end;
    bool done;
};

static bool list_next(struct list *l, const char **elem, size_t *n)
{
    if (l->done)
        return false;
    const char *comma = find(l->p, (size_t)(l->end - l->p), ',');
    const char *stop = comma ? comma : l->end;
    *elem = l->p;
    *n = (size_t)(stop - l->p);
    trim(elem, n);
    if (comma)
        l->p = comma + 1;
    else
        l->done = true;
    return true;
}

static bool parse_decimal(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* RFC 9110 §8.6: Content-Length = 1*DIGIT, but a recipient may accept a list
 * of identical values ("42, 42") as one, as left behind by some proxies. */
static bool parse_length(const char *v, size_t n, uint64_t *out)
{
    struct list l = {v, v + n, false};
    const char *e;
    size_t en;
    bool any = false;
    uint64_t first = 0;
    while (list_next(&l, &e, &en)) {
        uint64_t x;
        if (!parse_decimal(e, en, &x) || (any && x != first))
            return false;
        first = x;
        any = true;
    }
    *out = first;
    return any;
}

/* Whether the last coding listed in a Transfer-Encoding value is chunked (1) or
 * not (0); -1 if the value lists none. Parameters after ';' are ignored. */
static int final_chunked(const char *v, size_t n)
{
    struct list l = {v, v + n, false};
    const char *e;
    size_t en;
    int r = -1;
    while (list_next(&l, &e, &en)) {
        const char *semi = find(e, en, ';');
        if (semi)
            en = (size_t)(semi - e);
        trim(&e, &en);
        if (en)
            r = TOKEN_EQ(e, en, "chunked");
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* Response parser                                                          */
/* ------------------------------------------------------------------------ */

/* p->_state */
enum {
    ST_STATUS_LINE, /* expecting "HTTP/1.x NNN reason" */
    ST_FIELDS,      /* header field lines until the blank line */
    ST_BODY,        /* Content-Length body: _remaining bytes left */
    ST_BODY_CLOSE,  /* body delimited by the connection closing */
    ST_CHUNK_SIZE,  /* chunk-size [; extensions] line */
    ST_CHUNK_DATA,  /* _remaining bytes of chunk data left */
    ST_CHUNK_CR,    /* the CR (or bare LF) after chunk data */
    ST_CHUNK_LF,    /* the LF after that CR */
    ST_TRAILER,     /* trailer field lines until the blank line */
    ST_DONE,        /* a final response is complete: http_begin() comes next */
    ST_ERROR,       /* p->error says why: http_begin() comes next */
};

enum step {
    STEP_NEXT,  /* the state changed: keep going */
    STEP_MORE,  /* all input consumed */
    STEP_DONE,  /* the response is complete */
    STEP_ERROR, /* p->error says why */
};

/* p->_last_field: the field line an obs-fold line would continue. */
enum {
    FIELD_NONE,           /* no field line yet */
    FIELD_OTHER,          /* one that does not matter for framing */
    FIELD_CONTENT_LENGTH, /* the three that do */
    FIELD_TRANSFER_ENCODING,
    FIELD_CONNECTION,
};

/* One line of input, terminator excluded from n but included in raw. */
struct line {
    const char *s;
    size_t n, raw;
};

void http_parser_init(struct http_parser *p)
{
    memset(p, 0, sizeof *p);
    http_begin(p, false);
}

void http_parser_free(struct http_parser *p)
{
    buf_free(&p->head);
    buf_free(&p->body);
    buf_free(&p->_carry);
    memset(p, 0, sizeof *p);
}

/* Forget what the head read so far said; also run between an interim 1xx
 * response and the next head. */
static void reset_head(struct http_parser *p)
{
    p->_state = ST_STATUS_LINE;
    p->status = 0;
    p->_version_10 = p->_chunked = p->_close_delimited = false;
    p->_has_te = p->_has_length = p->_bad_length = false;
    p->_conn_close = p->_conn_keep_alive = false;
    p->_last_field = FIELD_NONE;
    p->_folded = false;
    p->_remaining = 0;
    p->_head_len = 0;
    p->head.len = 0;
}

void http_begin(struct http_parser *p, bool head_request)
{
    reset_head(p);
    p->keep_alive = false;
    p->error = HTTP_ERR_NONE;
    p->_head_request = head_request;
    p->_started = false;
    buf_reset(&p->_carry, KEEP_BUFFER);
    buf_reset(&p->head, KEEP_BUFFER);
    buf_reset(&p->body, KEEP_BUFFER);
}

bool http_started(const struct http_parser *p) { return p->_started; }

static enum step fail(struct http_parser *p, enum http_error e)
{
    p->error = e;
    p->_state = ST_ERROR;
    return STEP_ERROR;
}

static enum step done(struct http_parser *p)
{
    p->_state = ST_DONE;
    return STEP_DONE;
}

/* Take the next complete line from buf[*off..len), joined with the start of
 * it carried from earlier reads. The common case (a whole line in buf) is
 * returned in place. Returns 1 with a line, 0 when the input ended first (the
 * partial line is carried), -1 when the line would exceed limit bytes: checked
 * before buffering, so a hostile server cannot make the carry grow past it. */
static int take_line(struct http_parser *p, const char *buf, size_t len, size_t *off, size_t limit,
                     struct line *ln)
{
    const char *start = buf + *off;
    size_t avail = len - *off;
    const char *nl = find(start, avail, '\n');
    size_t take = nl ? (size_t)(nl - start) + 1 : avail;
    if (take > limit || p->_carry.len > limit - take)
        return -1;
    *off += take;
    if (!nl) {
        buf_append(&p->_carry, start, take);
        return 0;
    }
    if (p->_carry.len) {
        buf_append(&p->_carry, start, take);
        ln->s = p->_carry.data;
        ln->raw = p->_carry.len;
        p->_carry.len = 0; /* the bytes stay valid until the next append */
    } else {
        ln->s = start;
        ln->raw = take;
    }
    /* RFC 9112 §2.2: a recipient may accept a bare LF as a line terminator. */
    ln->n = ln->raw - 1;
    if (ln->n && ln->s[ln->n - 1] == '\r')
        ln->n--;
    return 1;
}

/* RFC 9112 §4: status-line = HTTP-version SP status-code SP [ reason-phrase ].
 * The reason phrase is ignored, and may be missing with or without its SP.
 * More than one SP after the version is accepted, as curl and wrk do. */
static bool parse_status_line(struct http_parser *p, const char *s, size_t n)
{
    if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9' || s[8] != ' ')
        return false;
    size_t at = 9;
    while (at < n && s[at] == ' ')
        at++;
    if (n < at + 3)
        return false;
    int code = 0;
    for (size_t i = at; i < at + 3; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        code = code * 10 + (s[i] - '0');
    }
    if (code < 100 || (n > at + 3 && s[at + 3] != ' '))
        return false;
    p->status = code;
    p->_version_10 = s[7] == '0';
    return true;
}

static void on_connection(struct http_parser *p, const char *v, size_t n)
{
    /* RFC 9110 §7.6.1: Connection = #connection-option, case-insensitive. */
    struct list l = {v, v + n, false};
    const char *e;
    size_t en;
    while (list_next(&l, &e, &en)) {
        if (TOKEN_EQ(e, en, "close"))
            p->_conn_close = true;
        else if (TOKEN_EQ(e, en, "keep-alive"))
            p->_conn_keep_alive = true;
    }
}

/* An invalid Content-Length is only an error when it decides the framing
 * (RFC 9112 §6.3 item 5), so it is noted here and judged at the end of the head. */
static void on_content_length(struct http_parser *p, const char *v, size_t n)
{
    uint64_t len;
    if (!parse_length(v, n, &len) || (p->_has_length && len != p->_remaining)) {
        p->_bad_length = true;
        return;
    }
    p->_has_length = true;
    p->_remaining = len;
}

static void on_transfer_encoding(struct http_parser *p, const char *v, size_t n)
{
    /* Several field lines form one list (RFC 9110 §5.3): the last coding wins. */
    int r = final_chunked(v, n);
    p->_has_te = true;
    if (r >= 0)
        p->_chunked = r;
}

/* RFC 9112 §5: field-line = field-name ":" OWS field-value OWS. A name must be a
 * token, which also rejects whitespace before the colon (§5.1). A line
 * starting with whitespace is obsolete line folding (§5.2), handled apart.
 * Returns the name's length, 0 if the line is not a field line. */
static size_t field_name(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && tchar[(unsigned char)s[i]])
        i++;
    return i < n && s[i] == ':' ? i : 0;
}

/* The value v of a field that matters for framing, or of a line continuing
 * one. A continued Transfer-Encoding or Connection is one more list element
 * (the fold is a SP, and those lists are comma-separated: a field split
 * there is what folding was for); a continued Content-Length must repeat
 * the value, like a second field line. */
static void on_framing_value(struct http_parser *p, const char *v, size_t vn)
{
    trim(&v, &vn);
    if (p->_last_field == FIELD_CONTENT_LENGTH)
        on_content_length(p, v, vn);
    else if (p->_last_field == FIELD_TRANSFER_ENCODING)
        on_transfer_encoding(p, v, vn);
    else if (p->_last_field == FIELD_CONNECTION)
        on_connection(p, v, vn);
}

static bool on_field_line(struct http_parser *p, const char *s, size_t n)
{
    size_t name_len = field_name(s, n);
    if (name_len == 0)
        return false;
    p->_last_field = FIELD_OTHER;
    /* Only three fields matter for framing; the length test skips the rest. */
    if (name_len != 10 && name_len != 14 && name_len != 17)
        return true;
    if (TOKEN_EQ(s, name_len, "content-length"))
        p->_last_field = FIELD_CONTENT_LENGTH;
    else if (TOKEN_EQ(s, name_len, "transfer-encoding"))
        p->_last_field = FIELD_TRANSFER_ENCODING;
    else if (TOKEN_EQ(s, name_len, "connection"))
        p->_last_field = FIELD_CONNECTION;
    on_framing_value(p, s + name_len + 1, n - name_len - 1);
    return true;
}

/* RFC 9112 §5.2: a user agent receiving obs-fold (a line starting with SP or
 * HTAB after a field line) in a response replaces it with SP. The kept head
 * gets the previous line's CRLF replaced by spaces, so that response() sees
 * one field. Returns false for a fold with no field line before it. */
static bool on_fold(struct http_parser *p, const struct line *ln)
{
    if (p->_last_field == FIELD_NONE)
        return false;
    p->_folded = true;
    on_framing_value(p, ln->s, ln->n);
    if (p->want_head) {
        struct buf *h = &p->head;
        h->data[h->len - 1] = ' ';
        if (h->len >= 2 && h->data[h->len - 2] == '\r')
            h->data[h->len - 2] = ' ';
        buf_append(h, ln->s, ln->n);
        buf_append(h, "\r\n", 2);
    }
    return true;
}

/* RFC 9112 §9.3: HTTP/1.1 is persistent unless "close" is sent; HTTP/1.0 only
 * with "keep-alive". */
static bool persistent(const struct http_parser *p)
{
    if (p->_conn_close)
        return false;
    return !p->_version_10 || p->_conn_keep_alive;
}

static enum step close_delimited(struct http_parser *p)
{
    p->_close_delimited = true;
    p->keep_alive = false;
    p->_state = ST_BODY_CLOSE;
    return STEP_NEXT;
}

/* The blank line ended a head: decide the message length, RFC 9112 §6.3. */
static enum step end_of_head(struct http_parser *p)
{
    if (p->status < 200 && p->status != 101) {
        /* RFC 9110 §15.2: interim responses precede the final one. Their
         * heads and the final one share one HTTP_MAX_HEAD (as curl counts
         * them), so a server sending 100 Continue forever is an error. */
        size_t interim = p->_head_len;
        reset_head(p);
        p->_head_len = interim;
        return STEP_NEXT;
    }
    p->keep_alive = p->status != 101 && persistent(p);
    /* Item 1: no content after HEAD, 1xx (101 switches protocols), 204, 304. */
    if (p->_head_request || p->status < 200 || p->status == 204 || p->status == 304)
        return done(p);
    /* Item 3: chunked as the final coding frames the body, overriding any
     * Content-Length; any other coding runs until close. An HTTP/1.0 message
     * with Transfer-Encoding has faulty framing, so it too (RFC 9112 §6.1). */
    if (p->_has_te) {
        if (!p->_chunked || p->_version_10)
            return close_delimited(p);
        p->_state = ST_CHUNK_SIZE;
        return STEP_NEXT;
    }
    if (p->_bad_length) /* item 5 */
        return fail(p, HTTP_ERR_CONTENT_LENGTH);
    if (p->_has_length) { /* item 6 */
        if (p->_remaining == 0)
            return done(p);
        p->_state = ST_BODY;
        return STEP_NEXT;
    }
    return close_delimited(p); /* item 8 */
}

/* A head byte for byte the cached one: its fields without parsing it. The
 * cached bytes end with the head's blank line, so a match is the whole head. */
static bool head_cached(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    const struct http_head_cache *c = p->cache;
    if (!c || c->len == 0 || len - *off < c->len || memcmp(buf + *off, c->data, c->len) != 0)
        return false;
    p->status = c->status;
    p->_version_10 = c->version_10;
    p->_has_te = c->has_te;
    p->_chunked = c->chunked;
    p->_has_length = c->has_length;
    p->_bad_length = c->bad_length;
    p->_conn_close = c->conn_close;
    p->_conn_keep_alive = c->conn_keep_alive;
    p->_remaining = c->length;
    p->_head_len += c->len;
    if (p->want_head)
        buf_append(&p->head, c->data, c->len);
    *off += c->len;
    return true;
}

static void head_remember(struct http_parser *p, const char *head, size_t len)
{
    struct http_head_cache *c = p->cache;
    if (!c || len > sizeof c->data)
        return;
    memcpy(c->data, head, len);
    c->len = len;
    c->status = p->status;
    c->version_10 = p->_version_10;
    c->has_te = p->_has_te;
    c->chunked = p->_chunked;
    c->has_length = p->_has_length;
    c->bad_length = p->_bad_length;
    c->conn_close = p->_conn_close;
    c->conn_keep_alive = p->_conn_keep_alive;
    c->length = p->_remaining;
}

static enum step on_head(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    struct line ln;
    /* A head that starts in this buffer can be looked up, and remembered
     * once its blank line is found in the same buffer. */
    size_t start = *off;
    bool whole = p->_state == ST_STATUS_LINE && p->_carry.len == 0;
    if (whole && head_cached(p, buf, len, off))
        return end_of_head(p);
    for (;;) {
        int r = take_line(p, buf, len, off, HTTP_MAX_HEAD - p->_head_len, &ln);
        if (r == 0)
            return STEP_MORE;
        if (r < 0)
            return fail(p, HTTP_ERR_HEAD_TOO_LARGE);
        p->_head_len += ln.raw;
        if (p->_state == ST_STATUS_LINE && ln.n == 0) {
            /* Empty lines before a status line (a stray CRLF after the last
             * body) are skipped, as wrk does, and count towards the limit. */
            start = *off;
            continue;
        }
        if (is_ows(ln.s[0]) && p->_state == ST_FIELDS) {
            if (!on_fold(p, &ln))
                return fail(p, HTTP_ERR_HEADER);
            continue;
        }
        if (p->want_head)
            buf_append(&p->head, ln.s, ln.raw);
        if (p->_state == ST_STATUS_LINE) {
            if (!parse_status_line(p, ln.s, ln.n))
                return fail(p, HTTP_ERR_STATUS_LINE);
            p->_state = ST_FIELDS;
        } else if (ln.n == 0) {
            /* Not an interim 1xx, nor a head whose folds the kept copy undid. */
            if (whole && (p->status >= 200 || p->status == 101) && !p->_folded)
                head_remember(p, buf + start, *off - start);
            return end_of_head(p);
        } else if (!on_field_line(p, ln.s, ln.n)) {
            return fail(p, HTTP_ERR_HEADER);
        }
    }
}

/* Body bytes for a response() hook, up to HTTP_MAX_BODY: a huge or endless
 * body must not cost its size in memory on every connection. */
static void keep_body(struct http_parser *p, const char *s, size_t n)
{
    if (p->body.len + n > HTTP_MAX_BODY)
        n = HTTP_MAX_BODY - p->body.len;
    buf_append(&p->body, s, n);
}

/* Count down _remaining body bytes; they are copied only for a response() hook. */
static void skip_body(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    size_t n = len - *off;
    if (n > p->_remaining)
        n = (size_t)p->_remaining;
    if (p->want_body)
        keep_body(p, buf + *off, n);
    *off += n;
    p->_remaining -= n;
}

static enum step on_body(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    skip_body(p, buf, len, off);
    return p->_remaining ? STEP_MORE : done(p);
}

static enum step on_body_close(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    if (p->want_body)
        keep_body(p, buf + *off, len - *off);
    *off = len;
    return STEP_MORE;
}

/* RFC 9112 §7.1: chunk-size = 1*HEXDIG, then optional chunk extensions
 * (BWS ";" ...), which are ignored. */
static bool parse_chunk_size(const char *s, size_t n, uint64_t *size)
{
    uint64_t v = 0;
    size_t i = 0;
    int d;
    for (; i < n && (d = hex_digit(s[i])) >= 0; i++) {
        if (v > UINT64_MAX >> 4)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    if (i == 0)
        return false;
    while (i < n && is_ows(s[i]))
        i++;
    if (i < n && s[i] != ';')
        return false;
    *size = v;
    return true;
}

static enum step on_chunk_size(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    struct line ln;
    uint64_t size;
    int r = take_line(p, buf, len, off, HTTP_MAX_HEAD, &ln);
    if (r == 0)
        return STEP_MORE;
    if (r < 0 || !parse_chunk_size(ln.s, ln.n, &size))
        return fail(p, HTTP_ERR_CHUNK);
    if (size == 0) {
        p->_head_len = 0; /* the trailer section gets the same limit as a head */
        p->_last_field = FIELD_NONE;
        p->_state = ST_TRAILER;
    } else {
        p->_remaining = size;
        p->_state = ST_CHUNK_DATA;
    }
    return STEP_NEXT;
}

static enum step on_chunk_data(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    skip_body(p, buf, len, off);
    if (p->_remaining)
        return STEP_MORE;
    p->_state = ST_CHUNK_CR;
    return STEP_NEXT;
}

/* The CRLF after chunk data is matched byte by byte (no carry needed); a bare
 * LF is accepted as for every other line. */
static enum step on_chunk_crlf(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    if (*off == len)
        return STEP_MORE;
    char c = buf[(*off)++];
    if (c == '\r' && p->_state == ST_CHUNK_CR) {
        p->_state = ST_CHUNK_LF;
        return STEP_NEXT;
    }
    if (c != '\n')
        return fail(p, HTTP_ERR_CHUNK);
    p->_state = ST_CHUNK_SIZE;
    return STEP_NEXT;
}

/* RFC 9112 §7.1.2: trailer fields are checked for syntax and discarded. */
static enum step on_trailer(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    struct line ln;
    for (;;) {
        int r = take_line(p, buf, len, off, HTTP_MAX_HEAD - p->_head_len, &ln);
        if (r == 0)
            return STEP_MORE;
        if (r < 0)
            return fail(p, HTTP_ERR_HEAD_TOO_LARGE);
        p->_head_len += ln.raw;
        if (ln.n == 0)
            return done(p);
        /* A folded trailer line continues the one before (§5.2). */
        bool fold = is_ows(ln.s[0]) && p->_last_field != FIELD_NONE;
        if (!fold && !field_name(ln.s, ln.n))
            return fail(p, HTTP_ERR_HEADER);
        p->_last_field = FIELD_OTHER;
    }
}

static enum step step(struct http_parser *p, const char *buf, size_t len, size_t *off)
{
    switch (p->_state) {
    case ST_STATUS_LINE:
    case ST_FIELDS:
        return on_head(p, buf, len, off);
    case ST_BODY:
        return on_body(p, buf, len, off);
    case ST_BODY_CLOSE:
        return on_body_close(p, buf, len, off);
    case ST_CHUNK_SIZE:
        return on_chunk_size(p, buf, len, off);
    case ST_CHUNK_DATA:
        return on_chunk_data(p, buf, len, off);
    case ST_CHUNK_CR:
    case ST_CHUNK_LF:
        return on_chunk_crlf(p, buf, len, off);
    case ST_TRAILER:
        return on_trailer(p, buf, len, off);
    case ST_DONE:
        return STEP_DONE;
    default:
        return STEP_ERROR;
    }
}

enum http_result http_parse(struct http_parser *p, const char *buf, size_t len, size_t *used)
{
    size_t off = 0;
    if (len && p->_state != ST_DONE && p->_state != ST_ERROR)
        p->_started = true;
    for (;;) {
        switch (step(p, buf, len, &off)) {
        case STEP_NEXT:
            continue;
        case STEP_MORE:
            *used = len;
            return HTTP_MORE;
        case STEP_DONE:
            *used = off;
            return HTTP_DONE;
        case STEP_ERROR:
            *used = off;
            return HTTP_ERROR;
        }
    }
}

enum http_result http_eof(struct http_parser *p)
{
    if (p->_state == ST_BODY_CLOSE) {
        p->_state = ST_DONE; /* RFC 9112 §6.3 item 8: the close ends the body */
        return HTTP_DONE;
    }
    if (p->_state == ST_ERROR)
        return HTTP_ERROR;
    if (p->_state == ST_DONE || !p->_started)
        return HTTP_MORE;
    fail(p, HTTP_ERR_TRUNCATED);
    return HTTP_ERROR;
}

void http_head_fields(const struct buf *head, const char **fields, size_t *len)
{
    *fields = NULL;
    *len = 0;
    if (head->len) {
        const char *nl = find(head->data, head->len, '\n');
        size_t start = nl ? (size_t)(nl - head->data) + 1 : head->len;
        *fields = head->data + start;
        *len = head->len - start;
    }
}

bool http_field_next(const char *s, size_t len, size_t *pos, const char **name, size_t *name_len,
                     const char **value, size_t *value_len)
{
    size_t i = *pos;
    while (i < len) {
        const char *nl = find(s + i, len - i, '\n');
        size_t end = nl ? (size_t)(nl - s) : len, next = nl ? end + 1 : len;
        if (end > i && s[end - 1] == '\r')
            end--;
        if (end == i) /* the blank line */
            break;
        const char *colon = find(s + i, end - i, ':');
        if (colon) {
            *name = s + i;
            *name_len = (size_t)(colon - *name);
            *value = colon + 1;
            *value_len = end - (size_t)(*value - s);
            trim(value, value_len);
            *pos = next;
            return true;
        }
        i = next;
    }
    *pos = len;
    return false;
}

bool http_list_has(const char *value, size_t len, const char *token, size_t token_len)
{
    struct list l = {value, value + len, false};
    const char *e;
    size_t en;
    while (list_next(&l, &e, &en))
        if (en == token_len && strncasecmp(e, token, en) == 0)
            return true;
    return false;
}

const char *http_error_str(enum http_error e)
{
    switch (e) {
    case HTTP_ERR_NONE:
        return "no error";
    case HTTP_ERR_STATUS_LINE:
        return "invalid status line";
    case HTTP_ERR_HEADER:
        return "invalid header field";
    case HTTP_ERR_HEAD_TOO_LARGE:
        return "response head too large";
    case HTTP_ERR_CONTENT_LENGTH:
        return "invalid Content-Length";
    case HTTP_ERR_CHUNK:
        return "invalid chunked encoding";
    case HTTP_ERR_TRUNCATED:
        return "connection closed mid-response";
    }
    return "unknown error";
}

/* ------------------------------------------------------------------------ */
/* Request verification                                                     */
/* ------------------------------------------------------------------------ */

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
    const char *nl = find(r->buf + r->off, r->len - r->off, '\n');
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
    while (i < end && tchar[(unsigned char)b[i]])
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
    trim(&v, &vn);
    at = (size_t)(v - r->buf);
    if (TOKEN_EQ(name, name_len, "content-length")) {
        uint64_t n;
        if (!parse_length(v, vn, &n) || (h->has_length && n != h->length))
            return rq_error(r, at, "invalid Content-Length");
        h->has_length = true;
        h->length = n;
        h->length_at = at;
    } else if (TOKEN_EQ(name, name_len, "transfer-encoding")) {
        int c = final_chunked(v, vn);
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
    while (i < l.end && is_ows(b[i]))
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
