/* HTTP/1.1 message framing (RFC 9112): the incremental response parser that
 * finds where each response ends in a byte stream arriving in arbitrary pieces.
 * SPDX-License-Identifier: MIT */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chars.h"
#include "http_syntax.h"

/* Buffers a rare large head or body grew are given back past this. */
#define KEEP_BUFFER (64 * 1024)

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
    const char *nl = http_find(start, avail, '\n');
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
    struct http_list l = {v, v + n, false};
    const char *e;
    size_t en;
    while (http_list_next(&l, &e, &en)) {
        if (HTTP_TOKEN_EQ(e, en, "close"))
            p->_conn_close = true;
        else if (HTTP_TOKEN_EQ(e, en, "keep-alive"))
            p->_conn_keep_alive = true;
    }
}

/* An invalid Content-Length is only an error when it decides the framing
 * (RFC 9112 §6.3 item 5), so it is noted here and judged at the end of the head. */
static void on_content_length(struct http_parser *p, const char *v, size_t n)
{
    uint64_t len;
    if (!http_parse_length(v, n, &len) || (p->_has_length && len != p->_remaining)) {
        p->_bad_length = true;
        return;
    }
    p->_has_length = true;
    p->_remaining = len;
}

static void on_transfer_encoding(struct http_parser *p, const char *v, size_t n)
{
    /* Several field lines form one list (RFC 9110 §5.3): the last coding wins. */
    int r = http_final_chunked(v, n);
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
    while (i < n && http_tchar[(unsigned char)s[i]])
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
    http_trim(&v, &vn);
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
    if (HTTP_TOKEN_EQ(s, name_len, "content-length"))
        p->_last_field = FIELD_CONTENT_LENGTH;
    else if (HTTP_TOKEN_EQ(s, name_len, "transfer-encoding"))
        p->_last_field = FIELD_TRANSFER_ENCODING;
    else if (HTTP_TOKEN_EQ(s, name_len, "connection"))
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
        if (http_is_ows(ln.s[0]) && p->_state == ST_FIELDS) {
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
    while (i < n && http_is_ows(s[i]))
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
        bool fold = http_is_ows(ln.s[0]) && p->_last_field != FIELD_NONE;
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
        const char *nl = http_find(head->data, head->len, '\n');
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
        const char *nl = http_find(s + i, len - i, '\n');
        size_t end = nl ? (size_t)(nl - s) : len, next = nl ? end + 1 : len;
        if (end > i && s[end - 1] == '\r')
            end--;
        if (end == i) /* the blank line */
            break;
        const char *colon = http_find(s + i, end - i, ':');
        if (colon) {
            *name = s + i;
            *name_len = (size_t)(colon - *name);
            *value = colon + 1;
            *value_len = end - (size_t)(*value - s);
            http_trim(value, value_len);
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
    struct http_list l = {value, value + len, false};
    const char *e;
    size_t en;
    while (http_list_next(&l, &e, &en))
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
