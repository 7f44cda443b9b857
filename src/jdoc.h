/* A strict JSON reader for documents volley did not write itself (volley
 * merge reads results from other machines): RFC 8259 and nothing more, no
 * comments, trailing commas or duplicate keys, well-formed UTF-8, bounded
 * depth. The document becomes a tree; numbers keep their text so that
 * 64-bit counters read back exactly.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_JDOC_H
#define VOLLEY_JDOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deeper nesting is refused: volley's documents nest four levels. */
#define JDOC_MAX_DEPTH 64

enum jdoc_type {
    JDOC_NULL,
    JDOC_FALSE,
    JDOC_TRUE,
    JDOC_NUMBER,
    JDOC_STRING,
    JDOC_ARRAY,
    JDOC_OBJECT
};

struct jdoc_member;

struct jdoc {
    enum jdoc_type type;
    size_t len; /* string bytes, array elements or object members */
    union {
        char *text;                  /* string (NUL-terminated, no NUL inside) or number */
        struct jdoc *items;          /* array */
        struct jdoc_member *members; /* object, in document order */
    } u;
};

struct jdoc_member {
    char *key;
    struct jdoc value;
};

/* Parses text[0..len) into a new tree; NULL and "line L, column C: what" in
 * err when it is not one well-formed JSON value. */
struct jdoc *jdoc_parse(const char *text, size_t len, char *err, size_t errlen);
void jdoc_free(struct jdoc *doc);

/* The member named key of an object; NULL when v is not an object or has none. */
const struct jdoc *jdoc_get(const struct jdoc *v, const char *key);
/* A number written as an integer in 0..2^64-1 (no sign, fraction or exponent). */
bool jdoc_u64(const struct jdoc *v, uint64_t *out);
/* Any number whose value is finite as a double. */
bool jdoc_double(const struct jdoc *v, double *out);
/* The string, or NULL when v is not one. */
const char *jdoc_string(const struct jdoc *v);

#endif
