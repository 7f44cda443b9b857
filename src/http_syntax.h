/* The grammar both HTTP/1.1 parsers share (RFC 9110 §5.6): tokens, optional
 * whitespace, comma-separated lists, and the values of the two fields that
 * frame a message, Content-Length and Transfer-Encoding. Inline, for the
 * response parser's loop; http.c parses responses, http_request.c checks
 * requests.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_HTTP_SYNTAX_H
#define VOLLEY_HTTP_SYNTAX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-"
 * / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA */
static const unsigned char http_tchar[256] = {
    ['0' ... '9'] = 1, ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['!'] = 1, ['#'] = 1, ['$'] = 1,
    ['%'] = 1,         ['&'] = 1,         ['\''] = 1,        ['*'] = 1, ['+'] = 1, ['-'] = 1,
    ['.'] = 1,         ['^'] = 1,         ['_'] = 1,         ['`'] = 1, ['|'] = 1, ['~'] = 1,
};

#define HTTP_TOKEN_EQ(s, n, lit) ((n) == sizeof(lit) - 1 && strncasecmp((s), (lit), (n)) == 0)

static inline bool http_is_ows(char c) { return c == ' ' || c == '\t'; }

/* memchr that accepts an empty range at a NULL pointer. */
static inline const char *http_find(const char *s, size_t n, int c)
{
    return n ? memchr(s, c, n) : NULL;
}

static inline void http_trim(const char **s, size_t *n)
{
    while (*n && http_is_ows(**s))
        (*s)++, (*n)--;
    while (*n && http_is_ows((*s)[*n - 1]))
        (*n)--;
}

/* A cursor over a comma-separated list (RFC 9110 §5.6.1). Empty elements are
 * returned too: Content-Length treats them as errors, the others skip them. */
struct http_list {
    const char *p, *end;
    bool done;
};

static inline bool http_list_next(struct http_list *l, const char **elem, size_t *n)
{
    if (l->done)
        return false;
    const char *comma = http_find(l->p, (size_t)(l->end - l->p), ',');
    const char *stop = comma ? comma : l->end;
    *elem = l->p;
    *n = (size_t)(stop - l->p);
    http_trim(elem, n);
    if (comma)
        l->p = comma + 1;
    else
        l->done = true;
    return true;
}

static inline bool http_parse_decimal(const char *s, size_t n, uint64_t *out)
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
static inline bool http_parse_length(const char *v, size_t n, uint64_t *out)
{
    struct http_list l = {v, v + n, false};
    const char *e;
    size_t en;
    bool any = false;
    uint64_t first = 0;
    while (http_list_next(&l, &e, &en)) {
        uint64_t x;
        if (!http_parse_decimal(e, en, &x) || (any && x != first))
            return false;
        first = x;
        any = true;
    }
    *out = first;
    return any;
}

/* Whether the last coding listed in a Transfer-Encoding value is chunked (1) or
 * not (0); -1 if the value lists none. Parameters after ';' are ignored. */
static inline int http_final_chunked(const char *v, size_t n)
{
    struct http_list l = {v, v + n, false};
    const char *e;
    size_t en;
    int r = -1;
    while (http_list_next(&l, &e, &en)) {
        const char *semi = http_find(e, en, ';');
        if (semi)
            en = (size_t)(semi - e);
        http_trim(&e, &en);
        if (en)
            r = HTTP_TOKEN_EQ(e, en, "chunked");
    }
    return r;
}

#endif
