/* The strict JSON reader: a recursive-descent parser over RFC 8259's grammar
 * that builds a tree and says where the first mistake is.
 * SPDX-License-Identifier: MIT */
#include "jdoc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chars.h"
#include "xalloc.h"

struct parser {
    const unsigned char *p, *start, *end;
    int depth;
    const char *error; /* the first mistake; parsing stops there */
};

static bool fail(struct parser *ps, const char *what)
{
    if (!ps->error)
        ps->error = what;
    return false;
}

static void skip_space(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bool literal(struct parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail(ps, "not a JSON value");
    ps->p += n;
    return true;
}

/* ---- numbers ------------------------------------------------------------- */

static size_t digits(struct parser *ps)
{
    size_t n = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
        ps->p++, n++;
    return n;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static bool number(struct parser *ps, struct jdoc *v)
{
    const unsigned char *from = ps->p;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    if (ps->p < ps->end && *ps->p == '0') {
        ps->p++;
        if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            return fail(ps, "a number with a leading zero");
    } else if (digits(ps) == 0) {
        return fail(ps, "not a JSON value");
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (digits(ps) == 0)
            return fail(ps, "no digits after a decimal point");
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (digits(ps) == 0)
            return fail(ps, "no digits in an exponent");
    }
    v->type = JDOC_NUMBER;
    v->len = (size_t)(ps->p - from);
    /* not strndup: the input need not be NUL-terminated */
    v->u.text = xmalloc(v->len + 1);
    memcpy(v->u.text, from, v->len);
    v->u.text[v->len] = '\0';
    return true;
}

/* ---- strings ------------------------------------------------------------- */

static bool hex4(struct parser *ps, unsigned *out)
{
    unsigned v = 0;
    if (ps->end - ps->p < 4)
        return fail(ps, "an incomplete \\u escape");
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(*ps->p++);
        if (d < 0)
            return fail(ps, "an invalid \\u escape");
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return true;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* \uXXXX, with a surrogate pair as one code point; lone surrogates and
 * U+0000 (which a C string cannot hold) are refused. */
static bool unicode_escape(struct parser *ps, char *out, size_t *n)
{
    unsigned cp, low;
    if (!hex4(ps, &cp))
        return false;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return fail(ps, "a lone low surrogate in a \\u escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
            return fail(ps, "a high surrogate without its low surrogate");
        ps->p += 2;
        if (!hex4(ps, &low))
            return false;
        if (low < 0xdc00 || low > 0xdfff)
            return fail(ps, "a high surrogate without its low surrogate");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    if (cp == 0)
        return fail(ps, "a NUL character (\\u0000) in a string");
    *n = put_utf8(out, cp);
    return true;
}

static bool escape(struct parser *ps, char *out, size_t *n)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (ps->p == ps->end)
        return fail(ps, "an unterminated string");
    unsigned char c = *ps->p++;
    if (c == 'u')
        return unicode_escape(ps, out, n);
    const char *at = c ? strchr(from, c) : NULL;
    if (!at)
        return fail(ps, "an invalid escape in a string");
    out[0] = to[at - from];
    *n = 1;
    return true;
}

/* A string after its opening quote. The decoded text is never longer than
 * the encoded one, so one buffer of that size holds it. */
static bool string_body(struct parser *ps, char **out, size_t *len)
{
    const unsigned char *q = ps->p;
    while (q < ps->end && *q != '"')
        q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
    char *s = xmalloc((size_t)(q - ps->p) + 1);
    size_t n = 0, k;
    for (;;) {
        if (ps->p == ps->end) {
            free(s);
            return fail(ps, "an unterminated string");
        }
        unsigned char c = *ps->p;
        bool ok = true;
        if (c == '"') {
            ps->p++;
            break;
        } else if (c == '\\') {
            ps->p++;
            ok = escape(ps, s + n, &k);
        } else if (c < 0x20) {
            ok = fail(ps, "a control character in a string");
        } else if (c < 0x80) {
            s[n] = (char)c;
            k = 1;
            ps->p++;
        } else if ((k = utf8_length(ps->p, ps->end)) != 0) {
            memcpy(s + n, ps->p, k);
            ps->p += k;
        } else {
            ok = fail(ps, "invalid UTF-8 in a string");
        }
        if (!ok) {
            free(s);
            return false;
        }
        n += k;
    }
    s[n] = '\0';
    *out = s;
    *len = n;
    return true;
}

static bool string(struct parser *ps, char **out, size_t *len)
{
    if (ps->p == ps->end || *ps->p != '"')
        return fail(ps, "expected a string");
    ps->p++;
    return string_body(ps, out, len);
}

/* ---- containers ---------------------------------------------------------- */

static bool value(struct parser *ps, struct jdoc *v);

static bool begin_container(struct parser *ps)
{
    if (++ps->depth > JDOC_MAX_DEPTH)
        return fail(ps, "nested too deeply");
    ps->p++;
    skip_space(ps);
    return true;
}

/* After a member or element: true at ',', false at the closing bracket. */
static bool more(struct parser *ps, char close, bool *again)
{
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        *again = true;
        return true;
    }
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        *again = false;
        return true;
    }
    return fail(ps, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
}

static bool array(struct parser *ps, struct jdoc *v)
{
    size_t cap = 0;
    bool again = true;
    v->type = JDOC_ARRAY;
    if (!begin_container(ps))
        return false;
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        again = false;
    }
    while (again) {
        if (v->len == cap) {
            cap = cap ? 2 * cap : 4;
            v->u.items = xrealloc(v->u.items, cap * sizeof *v->u.items);
        }
        /* counted first: a partly built element is freed with the array */
        if (!value(ps, &v->u.items[v->len++]) || !more(ps, ']', &again))
            return false;
    }
    ps->depth--;
    return true;
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const struct jdoc_member *const *)a)->key,
                  (*(const struct jdoc_member *const *)b)->key);
}

/* Keys are compared after decoding ("a" and "\u0061" are the same key);
 * sorting keeps a hostile object of millions of keys cheap. */
static bool unique_keys(struct parser *ps, const struct jdoc *v)
{
    if (v->len < 2)
        return true;
    const struct jdoc_member **sorted = xmalloc(v->len * sizeof *sorted);
    for (size_t i = 0; i < v->len; i++)
        sorted[i] = &v->u.members[i];
    qsort(sorted, v->len, sizeof *sorted, by_key);
    bool ok = true;
    for (size_t i = 1; i < v->len && ok; i++)
        ok = strcmp(sorted[i - 1]->key, sorted[i]->key) != 0;
    free(sorted);
    return ok || fail(ps, "a duplicate key in an object");
}

static bool member(struct parser *ps, struct jdoc_member *m)
{
    size_t len;
    skip_space(ps);
    if (!string(ps, &m->key, &len))
        return false;
    skip_space(ps);
    if (ps->p == ps->end || *ps->p != ':') {
        m->value.type = JDOC_NULL;
        return fail(ps, "expected ':'");
    }
    ps->p++;
    return value(ps, &m->value);
}

static bool object(struct parser *ps, struct jdoc *v)
{
    size_t cap = 0;
    bool again = true;
    v->type = JDOC_OBJECT;
    if (!begin_container(ps))
        return false;
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        again = false;
    }
    while (again) {
        if (v->len == cap) {
            cap = cap ? 2 * cap : 8;
            v->u.members = xrealloc(v->u.members, cap * sizeof *v->u.members);
        }
        struct jdoc_member *m = &v->u.members[v->len];
        *m = (struct jdoc_member){0};
        bool ok = member(ps, m);
        if (m->key)
            v->len++; /* freed with the object, complete or not */
        if (!ok || !more(ps, '}', &again))
            return false;
    }
    ps->depth--;
    return unique_keys(ps, v);
}

/* On failure v may be partly built; its owner frees it. */
static bool value(struct parser *ps, struct jdoc *v)
{
    *v = (struct jdoc){.type = JDOC_NULL};
    skip_space(ps);
    if (ps->p == ps->end)
        return fail(ps, "unexpected end of the document");
    switch (*ps->p) {
    case '{':
        return object(ps, v);
    case '[':
        return array(ps, v);
    case '"':
        v->type = JDOC_STRING;
        return string(ps, &v->u.text, &v->len);
    case 't':
        v->type = JDOC_TRUE;
        return literal(ps, "true");
    case 'f':
        v->type = JDOC_FALSE;
        return literal(ps, "false");
    case 'n':
        return literal(ps, "null");
    default:
        return number(ps, v);
    }
}

static void free_value(struct jdoc *v)
{
    switch (v->type) {
    case JDOC_STRING:
    case JDOC_NUMBER:
        free(v->u.text);
        break;
    case JDOC_ARRAY:
        for (size_t i = 0; i < v->len; i++)
            free_value(&v->u.items[i]);
        free(v->u.items);
        break;
    case JDOC_OBJECT:
        for (size_t i = 0; i < v->len; i++) {
            free(v->u.members[i].key);
            free_value(&v->u.members[i].value);
        }
        free(v->u.members);
        break;
    default:
        break;
    }
}

/* ---- the public face ----------------------------------------------------- */

static void where(const struct parser *ps, char *err, size_t errlen)
{
    size_t line = 1, column = 1;
    for (const unsigned char *q = ps->start; q < ps->p; q++) {
        if (*q == '\n')
            line++, column = 1;
        else if ((*q & 0xc0) != 0x80) /* count characters, not bytes */
            column++;
    }
    snprintf(err, errlen, "line %zu, column %zu: %s", line, column, ps->error);
}

struct jdoc *jdoc_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct parser ps = {.p = (const unsigned char *)text,
                        .start = (const unsigned char *)text,
                        .end = (const unsigned char *)text + len};
    struct jdoc *doc = xmalloc(sizeof *doc);
    bool ok = value(&ps, doc);
    if (ok) {
        skip_space(&ps);
        if (ps.p != ps.end)
            ok = fail(&ps, "more text after the JSON value");
    }
    if (ok)
        return doc;
    where(&ps, err, errlen);
    jdoc_free(doc);
    return NULL;
}

void jdoc_free(struct jdoc *doc)
{
    if (!doc)
        return;
    free_value(doc);
    free(doc);
}

const struct jdoc *jdoc_get(const struct jdoc *v, const char *key)
{
    if (!v || v->type != JDOC_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->len; i++)
        if (strcmp(v->u.members[i].key, key) == 0)
            return &v->u.members[i].value;
    return NULL;
}

bool jdoc_u64(const struct jdoc *v, uint64_t *out)
{
    if (!v || v->type != JDOC_NUMBER || v->u.text[0] == '-' || strpbrk(v->u.text, ".eE"))
        return false;
    errno = 0;
    unsigned long long n = strtoull(v->u.text, NULL, 10);
    if (errno == ERANGE)
        return false;
    *out = n;
    return true;
}

bool jdoc_double(const struct jdoc *v, double *out)
{
    if (!v || v->type != JDOC_NUMBER)
        return false;
    double d = strtod(v->u.text, NULL);
    if (!isfinite(d))
        return false;
    *out = d;
    return true;
}

const char *jdoc_string(const struct jdoc *v)
{
    return v && v->type == JDOC_STRING ? v->u.text : NULL;
}
