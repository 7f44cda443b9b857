/* The JSON writer. Strings come from the command line, scripts and servers,
 * so any byte sequence must give valid JSON: well-formed UTF-8 is copied,
 * every other byte is written as the code point of the same value (\u00XX,
 * as if the text were Latin-1), so nothing is lost or rejected.
 * SPDX-License-Identifier: MIT */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chars.h"
#include "xalloc.h"

void json_init(struct json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->_compact = false;
    j->_nonempty[0] = false;
}

void json_init_line(struct json *j, FILE *f)
{
    json_init(j, f);
    j->_compact = true;
}

static void newline(struct json *j)
{
    if (!j->_compact)
        fprintf(j->f, "\n%*s", 2 * j->depth, "");
}

static void write_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str, *stop = s + strlen(str);
    fputc('"', f);
    while (*s) {
        unsigned char c = *s;
        size_t n;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c < 0x20 || c == 0x7F) {
            fprintf(f, "\\u%04x", c);
        } else if (c < 0x80) {
            fputc(c, f);
        } else if ((n = utf8_length(s, stop)) > 0) {
            fwrite(s, 1, n, f);
            s += n;
            continue;
        } else {
            fprintf(f, "\\u%04x", c);
        }
        s++;
    }
    fputc('"', f);
}

/* Separator, indentation and key before any value. */
static void prefix(struct json *j, const char *key)
{
    if (j->depth > 0) {
        if (j->_nonempty[j->depth])
            fputc(',', j->f);
        newline(j);
    }
    j->_nonempty[j->depth] = true;
    if (key) {
        write_string(j->f, key);
        fputs(j->_compact ? ":" : ": ", j->f);
    }
}

static void begin(struct json *j, const char *key, char open)
{
    prefix(j, key);
    fputc(open, j->f);
    if (++j->depth >= JSON_MAX_DEPTH)
        die("json: nesting deeper than %d", JSON_MAX_DEPTH);
    j->_nonempty[j->depth] = false;
}

static void end(struct json *j, char close)
{
    bool nonempty = j->_nonempty[j->depth];
    j->depth--;
    if (nonempty)
        newline(j);
    fputc(close, j->f);
}

void json_object_begin(struct json *j, const char *key) { begin(j, key, '{'); }
void json_object_end(struct json *j) { end(j, '}'); }
void json_array_begin(struct json *j, const char *key) { begin(j, key, '['); }
void json_array_end(struct json *j) { end(j, ']'); }

void json_string(struct json *j, const char *key, const char *s)
{
    prefix(j, key);
    if (s)
        write_string(j->f, s);
    else
        fputs("null", j->f);
}

void json_uint(struct json *j, const char *key, uint64_t v)
{
    prefix(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void json_uint_or_null(struct json *j, const char *key, uint64_t v)
{
    if (v)
        json_uint(j, key, v);
    else
        json_null(j, key);
}

char *json_format_double(char buf[32], double v)
{
    snprintf(buf, 32, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, 32, "%.17g", v);
    return buf;
}

void json_double(struct json *j, const char *key, double v)
{
    char buf[32];
    prefix(j, key);
    if (!isfinite(v)) {
        fputs("null", j->f);
        return;
    }
    fputs(json_format_double(buf, v), j->f);
}

void json_bool(struct json *j, const char *key, bool v)
{
    prefix(j, key);
    fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
    prefix(j, key);
    fputs("null", j->f);
}

bool json_finish(struct json *j)
{
    fputc('\n', j->f);
    return fflush(j->f) == 0 && !ferror(j->f);
}
