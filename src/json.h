/* A small streaming JSON writer: objects and arrays nested to a fixed depth,
 * strings escaped (RFC 8259 §7), integers exact, doubles that round-trip,
 * indented two spaces per level. Members take a key; array elements and the
 * top-level value pass NULL.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_JSON_H
#define VOLLEY_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
    FILE *f;
    int depth;
    bool _compact;
    bool _nonempty[JSON_MAX_DEPTH]; /* a value was written at this level */
};

void json_init(struct json *j, FILE *f);
/* A document on one line, without spaces (a JSON Lines record). */
void json_init_line(struct json *j, FILE *f);

void json_object_begin(struct json *j, const char *key);
void json_object_end(struct json *j);
void json_array_begin(struct json *j, const char *key);
void json_array_end(struct json *j);

/* A NULL s writes null. */
void json_string(struct json *j, const char *key, const char *s);
void json_uint(struct json *j, const char *key, uint64_t v);
/* A setting that is off when 0: 0 writes null. */
void json_uint_or_null(struct json *j, const char *key, uint64_t v);
/* Shortest of %.15g / %.17g that reads back as v; NaN and infinities,
 * which JSON cannot represent, are written as null. */
void json_double(struct json *j, const char *key, double v);
/* v as json_double writes it (a finite v): the shortest of %.15g and %.17g
 * that reads back as v. Returns buf. */
char *json_format_double(char buf[32], double v);
void json_bool(struct json *j, const char *key, bool v);
void json_null(struct json *j, const char *key);

/* Ends the document with a newline; false if writing failed. */
bool json_finish(struct json *j);

#endif
