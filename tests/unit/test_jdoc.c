/* Unit tests for src/jdoc.c: what RFC 8259 allows is read, exactly; every
 * kind of malformed input is refused with its line and column.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include "jdoc.h"

static struct jdoc *parse(const char *text)
{
    char err[160];
    struct jdoc *doc = jdoc_parse(text, strlen(text), err, sizeof err);
    if (!doc)
        UNIT_FAIL("%s: %s", text, err);
    return doc;
}

/* The error for text, which must be refused. */
static const char *refused(const char *text, size_t len)
{
    static char err[160];
    struct jdoc *doc = jdoc_parse(text, len, err, sizeof err);
    if (doc) {
        UNIT_FAIL("accepted: %.*s", (int)len, text);
        jdoc_free(doc);
        return "";
    }
    return err;
}

#define REFUSED(text, why) CHECK_STR(refused(text, sizeof text - 1), why)

TEST(objects_arrays_and_literals_become_a_tree)
{
    struct jdoc *d = parse(" {\"a\": [1, true, false, null, \"x\"], \"b\": {}, \"c\": []}\r\n");
    CHECK(d->type == JDOC_OBJECT);
    CHECK_U64(d->len, 3);
    const struct jdoc *a = jdoc_get(d, "a");
    CHECK(a && a->type == JDOC_ARRAY && a->len == 5);
    CHECK(a->u.items[1].type == JDOC_TRUE && a->u.items[2].type == JDOC_FALSE);
    CHECK(a->u.items[3].type == JDOC_NULL);
    CHECK_STR(jdoc_string(&a->u.items[4]), "x");
    CHECK(jdoc_get(d, "b")->type == JDOC_OBJECT && jdoc_get(d, "b")->len == 0);
    CHECK(jdoc_get(d, "c")->type == JDOC_ARRAY && jdoc_get(d, "c")->len == 0);
    CHECK(jdoc_get(d, "missing") == NULL);
    CHECK(jdoc_get(a, "a") == NULL); /* not an object */
    jdoc_free(d);
}

TEST(integers_read_back_exactly_to_64_bits)
{
    struct jdoc *d = parse("[18446744073709551615, 0, 9007199254740993, 18446744073709551616, -1, "
                           "1.0, 1e3, 2.5e-3]");
    uint64_t n;
    double x;
    CHECK(jdoc_u64(&d->u.items[0], &n) && n == UINT64_MAX);
    CHECK(jdoc_u64(&d->u.items[1], &n) && n == 0);
    CHECK(jdoc_u64(&d->u.items[2], &n) && n == 9007199254740993ULL);
    CHECK(!jdoc_u64(&d->u.items[3], &n)); /* overflow */
    CHECK(!jdoc_u64(&d->u.items[4], &n)); /* negative */
    CHECK(!jdoc_u64(&d->u.items[5], &n)); /* written as a fraction */
    CHECK(!jdoc_u64(&d->u.items[6], &n));
    CHECK(jdoc_double(&d->u.items[7], &x) && x == 2.5e-3);
    CHECK(jdoc_double(&d->u.items[4], &x) && x == -1);
    CHECK(!jdoc_u64(d, &n) && !jdoc_double(d, &x) && !jdoc_string(d));
    jdoc_free(d);
    d = parse("1e400");
    CHECK(!jdoc_double(d, &x)); /* not finite */
    jdoc_free(d);
}

TEST(escapes_and_utf8_decode_to_utf8)
{
    struct jdoc *d =
        parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9 \\u20AC \\ud83d\\ude00 é€😀\"");
    CHECK_STR(jdoc_string(d), "q\" b\\ s/ \b\f\n\r\t é € 😀 é€😀");
    CHECK_U64(d->len, strlen(jdoc_string(d)));
    jdoc_free(d);
}

TEST(malformed_documents_are_refused_with_where_and_why)
{
    REFUSED("", "line 1, column 1: unexpected end of the document");
    REFUSED("{\"a\": 1,}", "line 1, column 9: expected a string");
    REFUSED("[1, 2,]", "line 1, column 7: not a JSON value");
    REFUSED("[1 2]", "line 1, column 4: expected ',' or ']'");
    REFUSED("{\"a\" 1}", "line 1, column 6: expected ':'");
    REFUSED("{\"a\": 1 \"b\": 2}", "line 1, column 9: expected ',' or '}'");
    REFUSED("{\n  \"a\": 1,\n  \"a\": 2\n}", "line 4, column 2: a duplicate key in an object");
    REFUSED("{\"a\": 1, \"\\u0061\": 2}", "line 1, column 22: a duplicate key in an object");
    REFUSED("{} {}", "line 1, column 4: more text after the JSON value");
    REFUSED("// c\n1", "line 1, column 1: not a JSON value");
    REFUSED("tru", "line 1, column 1: not a JSON value");
    REFUSED("nul", "line 1, column 1: not a JSON value");
    REFUSED("NaN", "line 1, column 1: not a JSON value");
    REFUSED("+1", "line 1, column 1: not a JSON value");
    REFUSED("01", "line 1, column 2: a number with a leading zero");
    REFUSED("1.", "line 1, column 3: no digits after a decimal point");
    REFUSED("1e", "line 1, column 3: no digits in an exponent");
    REFUSED("-", "line 1, column 2: not a JSON value");
    REFUSED("\"abc", "line 1, column 5: an unterminated string");
    REFUSED("\"a\\", "line 1, column 4: an unterminated string");
    REFUSED("\"\\x\"", "line 1, column 4: an invalid escape in a string");
    REFUSED("\"\\u12\"", "line 1, column 4: an incomplete \\u escape");
    REFUSED("\"\\u12x4\"", "line 1, column 7: an invalid \\u escape");
    REFUSED("\"\\u12", "line 1, column 4: an incomplete \\u escape");
    REFUSED("\"\\u0000\"", "line 1, column 8: a NUL character (\\u0000) in a string");
    REFUSED("\"\\udc00\"", "line 1, column 8: a lone low surrogate in a \\u escape");
    REFUSED("\"\\ud800x\"", "line 1, column 8: a high surrogate without its low surrogate");
    REFUSED("\"\\ud800\\u0041\"", "line 1, column 14: a high surrogate without its low surrogate");
    REFUSED("\"a\tb\"", "line 1, column 3: a control character in a string");
    REFUSED("\"\0\"", "line 1, column 2: a control character in a string");
    REFUSED("\"\xc3\"", "line 1, column 2: invalid UTF-8 in a string");
    REFUSED("\"\xc0\xaf\"", "line 1, column 2: invalid UTF-8 in a string");         /* overlong */
    REFUSED("\"\xed\xa0\x80\"", "line 1, column 2: invalid UTF-8 in a string");     /* surrogate */
    REFUSED("\"\xf4\x90\x80\x80\"", "line 1, column 2: invalid UTF-8 in a string"); /* > U+10FFFF */
    REFUSED("\xef\xbb\xbf{}", "line 1, column 1: not a JSON value");                /* BOM */
    REFUSED("{\"a\": }", "line 1, column 7: not a JSON value");
    REFUSED("{1: 2}", "line 1, column 2: expected a string");
}

TEST(nesting_is_bounded)
{
    char deep[2 * JDOC_MAX_DEPTH + 3];
    memset(deep, '[', JDOC_MAX_DEPTH);
    memset(deep + JDOC_MAX_DEPTH, ']', JDOC_MAX_DEPTH);
    deep[2 * JDOC_MAX_DEPTH] = '\0';
    jdoc_free(parse(deep));
    memset(deep, '[', JDOC_MAX_DEPTH + 1);
    memset(deep + JDOC_MAX_DEPTH + 1, ']', JDOC_MAX_DEPTH + 1);
    deep[2 * JDOC_MAX_DEPTH + 2] = '\0';
    CHECK_STR(refused(deep, strlen(deep)), "line 1, column 65: nested too deeply");
}

TEST(a_partly_built_tree_is_freed_on_error)
{
    /* Under the sanitizer build a leak here fails the test. */
    REFUSED("{\"a\": [{\"b\": [1, \"x\", {\"c\": tru}]}]}", "line 1, column 29: not a JSON value");
    REFUSED("[[\"a\", [1, {\"k\": \"v\", \"k\": 1}]]]",
            "line 1, column 30: a duplicate key in an object");
}

TEST(a_thousand_distinct_keys_are_accepted)
{
    size_t cap = 16 * 1000 + 8, n = 0;
    char *text = malloc(cap);
    n += (size_t)sprintf(text + n, "{");
    for (int i = 0; i < 1000; i++)
        n += (size_t)sprintf(text + n, "%s\"%d\": %d", i ? ", " : "", i, i);
    sprintf(text + n, "}");
    struct jdoc *d = parse(text);
    uint64_t v;
    CHECK(d && d->len == 1000 && jdoc_u64(jdoc_get(d, "999"), &v) && v == 999);
    jdoc_free(d);
    free(text);
}
