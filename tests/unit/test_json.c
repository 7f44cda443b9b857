/* Unit tests for src/json.c: layout, escaping of every kind of byte,
 * numbers that read back exactly, null for what JSON cannot represent.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include <math.h>

#include "json.h"

/* The writer's output for what fill() writes. Caller frees. */
static char *render(void (*fill)(struct json *))
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    struct json j;
    json_init(&j, f);
    fill(&j);
    CHECK(json_finish(&j));
    fclose(f);
    return out;
}

static char *render_line(void (*fill)(struct json *))
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    struct json j;
    json_init_line(&j, f);
    fill(&j);
    CHECK(json_finish(&j));
    fclose(f);
    return out;
}

static void nested(struct json *j)
{
    json_object_begin(j, NULL);
    json_uint(j, "n", 18446744073709551615ULL);
    json_object_begin(j, "empty");
    json_object_end(j);
    json_array_begin(j, "list");
    json_bool(j, NULL, true);
    json_null(j, NULL);
    json_string(j, NULL, NULL);
    json_array_end(j);
    json_array_begin(j, "none");
    json_array_end(j);
    json_object_end(j);
}

TEST(layout_nests_with_commas_and_indentation)
{
    char *s = render(nested);
    CHECK_STR(s, "{\n"
                 "  \"n\": 18446744073709551615,\n"
                 "  \"empty\": {},\n"
                 "  \"list\": [\n"
                 "    true,\n"
                 "    null,\n"
                 "    null\n"
                 "  ],\n"
                 "  \"none\": []\n"
                 "}\n");
    free(s);
}

TEST(a_line_document_has_no_newline_or_spaces_inside)
{
    char *s = render_line(nested);
    CHECK_STR(s, "{\"n\":18446744073709551615,\"empty\":{},\"list\":[true,null,null],"
                 "\"none\":[]}\n");
    free(s);
}

static void escapes(struct json *j) { json_string(j, NULL, "q\" b\\ \n\r\t \x01\x1f\x7f /"); }

TEST(control_characters_quotes_and_backslashes_are_escaped)
{
    char *s = render(escapes);
    CHECK_STR(s, "\"q\\\" b\\\\ \\n\\r\\t \\u0001\\u001f\\u007f /\"\n");
    free(s);
}

static void utf8(struct json *j)
{
    /* é, €, U+1F600, then invalid: a lone continuation byte, an overlong
     * "/", a surrogate half, a truncated sequence, a byte above F4. */
    json_string(j, "k\xc3\xa9",
                "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\x80|\xc0\xaf|\xed\xa0\x80|"
                "\xe2\x82|\xf5");
}

static void open_object(struct json *j)
{
    json_object_begin(j, NULL);
    utf8(j);
    json_object_end(j);
}

TEST(valid_utf8_is_copied_and_other_bytes_become_latin1_code_points)
{
    char *s = render(open_object);
    CHECK_STR(s,
              "{\n  \"k\xc3\xa9\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\\u0080|\\u00c0\\u00af|"
              "\\u00ed\\u00a0\\u0080|\\u00e2\\u0082|\\u00f5\"\n}\n");
    free(s);
}

static void numbers(struct json *j)
{
    json_array_begin(j, NULL);
    json_double(j, NULL, 0.1);
    json_double(j, NULL, 1.0 / 3.0);
    json_double(j, NULL, 75);
    json_double(j, NULL, -2.5e-7);
    json_double(j, NULL, NAN);
    json_double(j, NULL, INFINITY);
    json_uint(j, NULL, 0);
    json_array_end(j);
}

TEST(doubles_round_trip_and_non_finite_values_are_null)
{
    char *s = render(numbers);
    CHECK_STR(s, "[\n  0.1,\n  0.33333333333333331,\n  75,\n  -2.5e-07,\n  null,\n  null,\n"
                 "  0\n]\n");
    CHECK(strtod("0.33333333333333331", NULL) == 1.0 / 3.0);
    free(s);
}

TEST(finish_reports_a_failed_write)
{
    FILE *f = fopen("/dev/full", "w");
    if (!f) {
        UNIT_FAIL("cannot open /dev/full");
        return;
    }
    struct json j;
    json_init(&j, f);
    json_string(&j, NULL, "x");
    CHECK(!json_finish(&j));
    fclose(f);
}
