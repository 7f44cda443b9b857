/* Fuzz target for the strict JSON reader (src/jdoc.c), which volley merge
 * runs on files from other machines: whatever the bytes, it returns a tree
 * or an error, and a tree written out again (canonically) reads back as the
 * same tree, with every string well-formed and NUL-free and every integer
 * exact.
 * SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "jdoc.h"

struct out {
    char *buf;
    size_t len, cap;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        o->cap = 2 * (o->len + n + 1);
        o->buf = realloc(o->buf, o->cap);
        FUZZ_CHECK(o->buf);
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void put_string(struct out *o, const char *s, size_t n)
{
    FUZZ_CHECK(strlen(s) == n);
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        char esc[8];
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(o, esc, 6);
        } else {
            put(o, s + i, 1);
        }
    }
    put(o, "\"", 1);
}

static void write_value(struct out *o, const struct jdoc *v)
{
    uint64_t n;
    switch (v->type) {
    case JDOC_NULL:
        put(o, "null", 4);
        break;
    case JDOC_TRUE:
        put(o, "true", 4);
        break;
    case JDOC_FALSE:
        put(o, "false", 5);
        break;
    case JDOC_NUMBER:
        if (jdoc_u64(v, &n)) {
            char text[32];
            /* exact: the digits read back are the digits written */
            snprintf(text, sizeof text, "%" PRIu64, n);
            FUZZ_CHECK(strcmp(text, v->u.text) == 0);
        }
        put(o, v->u.text, v->len);
        break;
    case JDOC_STRING:
        put_string(o, v->u.text, v->len);
        break;
    case JDOC_ARRAY:
        put(o, "[", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i)
                put(o, ",", 1);
            write_value(o, &v->u.items[i]);
        }
        put(o, "]", 1);
        break;
    case JDOC_OBJECT:
        put(o, "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i)
                put(o, ",", 1);
            put_string(o, v->u.members[i].key, strlen(v->u.members[i].key));
            put(o, ":", 1);
            write_value(o, &v->u.members[i].value);
        }
        put(o, "}", 1);
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[160];
    struct jdoc *doc = jdoc_parse((const char *)data, size, err, sizeof err);
    if (!doc) {
        FUZZ_CHECK(strncmp(err, "line ", 5) == 0);
        return 0;
    }
    struct out first = {0}, second = {0};
    write_value(&first, doc);
    struct jdoc *again = jdoc_parse(first.buf, first.len, err, sizeof err);
    FUZZ_CHECK(again);
    write_value(&second, again);
    FUZZ_CHECK(first.len == second.len && memcmp(first.buf, second.buf, first.len) == 0);
    jdoc_free(again);
    jdoc_free(doc);
    free(first.buf);
    free(second.buf);
    return 0;
}
