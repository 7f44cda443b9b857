/* Fuzz target for the command line's number and duration parsers
 * (src/units.c), checked against a plain reference reading of the same
 * grammar (optional leading space, decimal digits, for durations a fraction,
 * optional space, one suffix); for the instants of --start-at; and for the report's unit
 * formatters, which must always write a short terminated string whatever
 * the value; for the fractional readings of thresholds, which agree with
 * the whole ones where both read; and for --threshold expressions, which
 * either fail with a reason or read back the same from their own text.
 * SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "threshold.h"
#include "units.h"

/* The reference: "<space>*<digits><space>*<suffix>" where suffix is one of
 * names (matched ignoring case), each worth scale[i]; with fraction, also
 * "<digits>.<digits>", worth its value times scale[i] to the nearest unit
 * (half up; digits past the 18th do not count). False on overflow. */
static bool reference(const char *s, const char *const *names, const uint64_t *scale, size_t n,
                      bool fraction, uint64_t *out)
{
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return false;
    unsigned __int128 v = 0, num = 0, den = 1;
    for (; isdigit((unsigned char)*s); s++)
        if ((v = v * 10 + (unsigned)(*s - '0')) > UINT64_MAX)
            return false;
    if (fraction && *s == '.' && isdigit((unsigned char)s[1]))
        for (s++; isdigit((unsigned char)*s); s++)
            if (den < 1000000000000000000ULL) {
                num = num * 10 + (unsigned)(*s - '0');
                den *= 10;
            }
    while (isspace((unsigned char)*s))
        s++;
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0) {
            v = v * scale[i] + (num * scale[i] + den / 2) / den;
            if (v > UINT64_MAX)
                return false;
            *out = (uint64_t)v;
            return true;
        }
    return false;
}

/* Whatever a whole reading accepts, the fractional one reads the same
 * (to a double's precision). */
static void check_real(const char *s)
{
    uint64_t whole;
    double real;
    if (units_parse_metric(s, &whole)) {
        FUZZ_CHECK(units_parse_real_metric(s, &real));
        FUZZ_CHECK(real >= (double)whole * (1 - 1e-15) && real <= (double)whole * (1 + 1e-15));
    }
    if (units_parse_time(s, &whole)) {
        /* (a duration is read to the microsecond: 0.5 us either way) */
        FUZZ_CHECK(units_parse_real_time(s, &real));
        FUZZ_CHECK(real >= (double)whole * (1 - 1e-15) - 0.5 &&
                   real <= (double)whole * (1 + 1e-15) + 0.5);
    }
    if (units_parse_real_metric(s, &real))
        FUZZ_CHECK(real >= 0 && real == real);
}

static void check_threshold(const char *s)
{
    struct threshold t, again;
    char err[256] = "";
    if (!threshold_parse(s, &t, err, sizeof err)) {
        FUZZ_CHECK(err[0] != '\0'); /* cut to the buffer if need be */
        return;
    }
    FUZZ_CHECK(threshold_parse(t.text, &again, err, sizeof err));
    FUZZ_CHECK(strcmp(t.text, again.text) == 0 && t.metric == again.metric && t.op == again.op &&
               t.limit == again.limit && t.percent == again.percent &&
               t.percentile == again.percentile && t.status_lo == again.status_lo &&
               t.status_hi == again.status_hi);
    threshold_free(&t);
    threshold_free(&again);
}

static void check_formatted(const char *s)
{
    size_t len = strnlen(s, UNITS_BUF);
    FUZZ_CHECK(len > 0 && len < UNITS_BUF);
}

static void format_all(long double v)
{
    char buf[UNITS_BUF];
    check_formatted(units_time_us(v, buf));
    check_formatted(units_metric(v, buf));
    check_formatted(units_binary(v, buf));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const metric_names[] = {"", "k", "m", "g", "t", "p"};
    static const uint64_t metric_scale[] = {
        1, 1000ULL, 1000000ULL, 1000000000ULL, 1000000000000ULL, 1000000000000000ULL};
    static const char *const time_names[] = {"", "s", "ms", "m", "h"};
    static const uint64_t time_scale[] = {1000000ULL, 1000000ULL, 1000ULL, 60000000ULL,
                                          3600000000ULL};
    char *s = malloc(size + 1);
    FUZZ_CHECK(s);
    memcpy(s, data, size);
    s[size] = '\0';

    uint64_t got, want;
    bool ok = units_parse_metric(s, &got);
    FUZZ_CHECK(ok == reference(s, metric_names, metric_scale, 6, false, &want));
    FUZZ_CHECK(!ok || got == want);
    if (ok)
        format_all((long double)got);

    ok = units_parse_time(s, &got);
    FUZZ_CHECK(ok == reference(s, time_names, time_scale, 5, true, &want));
    FUZZ_CHECK(!ok || got == want);
    if (ok) {
        char buf[UNITS_BUF];
        check_formatted(units_duration(got, buf));
    }

    check_real(s);
    check_threshold(s);

    /* An instant is never before 1970; a Unix time reads back as itself. */
    int64_t at;
    if (units_parse_instant(s, &at)) {
        FUZZ_CHECK(at >= 0);
        char unix_time[48];
        snprintf(unix_time, sizeof unix_time, "%lld.%06lld", (long long)(at / 1000000),
                 (long long)(at % 1000000));
        int64_t again;
        FUZZ_CHECK(units_parse_instant(unix_time, &again) && again == at);
    }

    /* The formatters on arbitrary values, as measurements can be. */
    if (size >= sizeof(uint64_t)) {
        uint64_t raw;
        memcpy(&raw, data, sizeof raw);
        format_all((long double)raw);
        char buf[UNITS_BUF];
        check_formatted(units_duration(raw, buf));
    }
    free(s);
    return 0;
}
