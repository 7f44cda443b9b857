/* Parsing of the command line's numbers and durations, and the report's unit
 * ladders, reproducing wrk's output digit for digit (wrk-spec §1.3, §2.2).
 * SPDX-License-Identifier: MIT */
#include "units.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct ladder {
    long double scale;
    const char *base;
    const char *units[6]; /* NULL-terminated */
};

static const struct ladder time_us = {1000, "us", {"ms", "s", NULL}};
static const struct ladder time_s = {60, "s", {"m", "h", NULL}};
static const struct ladder metric = {1000, "", {"k", "M", "G", "T", "P", NULL}};
static const struct ladder binary = {1024, "", {"K", "M", "G", "T", "P", NULL}};

/* Splits "<digits>[.<digits>]<spaces><suffix>" into its whole part, a
 * fraction frac / denom and the suffix, apart so that a duration is computed
 * in integers: 0.1s is exactly 100000 us, which the double 0.1 times 1e6
 * only nearly is. Digits past the 18th cannot change a duration's
 * microseconds and are skipped. Leading spaces are allowed as wrk's sscanf
 * allows them; signs are not (wrk would wrap "-1" round to 2^64 - 1). */
static bool split_fixed(const char *s, uint64_t *whole, uint64_t *frac, uint64_t *denom,
                        const char **suffix)
{
    uint64_t v = 0;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return false;
    for (; isdigit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *whole = v;
    *frac = 0;
    *denom = 1;
    if (*s == '.') {
        if (!isdigit((unsigned char)*++s))
            return false;
        for (; isdigit((unsigned char)*s); s++) {
            if (*denom < 1000000000000000000ULL) {
                *frac = *frac * 10 + (uint64_t)(*s - '0');
                *denom *= 10;
            }
        }
    }
    while (isspace((unsigned char)*s))
        s++;
    *suffix = s;
    return true;
}

/* "<digits><spaces><suffix>": a whole number. */
static bool split_number(const char *s, uint64_t *n, const char **suffix)
{
    uint64_t frac, denom;
    return split_fixed(s, n, &frac, &denom, suffix) && denom == 1;
}

/* "<digits>[.<digits>]<spaces><suffix>", as split_number does for whole
 * numbers. */
static bool split_real(const char *s, double *n, const char **suffix)
{
    while (isspace((unsigned char)*s))
        s++;
    const char *start = s;
    if (!isdigit((unsigned char)*s))
        return false;
    while (isdigit((unsigned char)*s))
        s++;
    if (*s == '.') {
        if (!isdigit((unsigned char)*++s))
            return false;
        while (isdigit((unsigned char)*s))
            s++;
    }
    /* The syntax is checked; strtod rounds the digits correctly (volley
     * never changes LC_NUMERIC, so the point is '.'). */
    double v = strtod(start, NULL);
    if (!isfinite(v))
        return false;
    while (isspace((unsigned char)*s))
        s++;
    *n = v;
    *suffix = s;
    return true;
}

static bool scale(uint64_t n, uint64_t factor, uint64_t *out)
{
    if (factor && n > UINT64_MAX / factor)
        return false;
    *out = n * factor;
    return true;
}

/* ---- instants ------------------------------------------------------------ */

/* Exactly n decimal digits. */
static bool fixed_digits(const char **s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++, (*s)++) {
        if (!isdigit((unsigned char)**s))
            return false;
        v = v * 10 + (**s - '0');
    }
    *out = v;
    return true;
}

/* ".ddd..." as microseconds, digits past the sixth dropped; at least one. */
static bool fraction_us(const char **s, int64_t *us)
{
    int64_t place = 100000;
    *us = 0;
    if (**s != '.')
        return true;
    if (!isdigit((unsigned char)*++*s))
        return false;
    for (; isdigit((unsigned char)**s); (*s)++, place /= 10)
        *us += (**s - '0') * place;
    return true;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* RFC 3339 section 5.6: full-date "T" partial-time time-offset. A leap
 * second (:60) is read as the last moment of its minute. */
static bool rfc3339(const char *s, int64_t *unix_us)
{
    int y, mo, d, h, mi, sec, oh = 0, om = 0;
    int64_t frac;
    if (!fixed_digits(&s, 4, &y) || *s++ != '-' || !fixed_digits(&s, 2, &mo) || *s++ != '-' ||
        !fixed_digits(&s, 2, &d) || (*s != 'T' && *s != 't' && *s != ' '))
        return false;
    s++;
    if (!fixed_digits(&s, 2, &h) || *s++ != ':' || !fixed_digits(&s, 2, &mi) || *s++ != ':' ||
        !fixed_digits(&s, 2, &sec) || !fraction_us(&s, &frac))
        return false;
    int sign = *s == '+' ? 1 : *s == '-' ? -1 : 0;
    if (sign) {
        s++;
        if (!fixed_digits(&s, 2, &oh) || *s++ != ':' || !fixed_digits(&s, 2, &om) || oh > 23 ||
            om > 59)
            return false;
    } else if (*s == 'Z' || *s == 'z') {
        s++;
    } else {
        return false;
    }
    if (*s || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
        sec > 60)
        return false;
    if (sec == 60) {
        sec = 59;
        frac = 999999;
    }
    int64_t t = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + sec;
    t -= sign * (oh * 3600 + om * 60);
    if (t < 0)
        return false;
    *unix_us = t * 1000000 + frac;
    return true;
}

bool units_parse_instant(const char *s, int64_t *unix_us)
{
    const char *p = s;
    uint64_t seconds = 0;
    int64_t frac;
    if (rfc3339(s, unix_us))
        return true;
    if (!isdigit((unsigned char)*p))
        return false;
    for (; isdigit((unsigned char)*p); p++) {
        seconds = seconds * 10 + (uint64_t)(*p - '0');
        if (seconds > INT64_MAX / 1000000 - 1)
            return false;
    }
    if (!fraction_us(&p, &frac) || *p)
        return false;
    *unix_us = (int64_t)seconds * 1000000 + frac;
    return true;
}

/* The factor of a metric suffix: none, or one of k m g t p (any case). */
static bool metric_factor(const char *suffix, uint64_t *factor)
{
    static const char *const suffixes = "kmgtp";
    *factor = 1;
    if (!*suffix)
        return true;
    const char *p = suffix[1] ? NULL : strchr(suffixes, tolower((unsigned char)*suffix));
    if (!p)
        return false;
    for (const char *q = suffixes; q <= p; q++)
        *factor *= 1000;
    return true;
}

bool units_parse_metric(const char *s, uint64_t *value)
{
    uint64_t n, factor;
    const char *suffix;
    if (!split_number(s, &n, &suffix) || !metric_factor(suffix, &factor))
        return false;
    return scale(n, factor, value);
}

bool units_parse_time(const char *s, uint64_t *us)
{
    static const struct {
        const char *name;
        uint64_t us;
    } suffixes[] = {
        {"", 1000000}, {"s", 1000000}, {"ms", 1000}, {"m", 60000000}, {"h", 3600000000},
    };
    uint64_t whole, frac, denom, n;
    const char *suffix;
    if (!split_fixed(s, &whole, &frac, &denom, &suffix))
        return false;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcasecmp(suffix, suffixes[i].name) != 0)
            continue;
        /* the fraction, to the nearest microsecond (half up) */
        unsigned __int128 part = ((unsigned __int128)frac * suffixes[i].us + denom / 2) / denom;
        if (!scale(whole, suffixes[i].us, &n) || part > UINT64_MAX - n)
            return false;
        *us = n + (uint64_t)part;
        return true;
    }
    return false;
}

bool units_parse_real_metric(const char *s, double *value)
{
    double n;
    uint64_t factor;
    const char *suffix;
    if (!split_real(s, &n, &suffix) || !metric_factor(suffix, &factor))
        return false;
    *value = n * (double)factor;
    return true;
}

bool units_parse_real_time(const char *s, double *us)
{
    static const struct {
        const char *name;
        double us;
    } suffixes[] = {
        {"", 1e6}, {"s", 1e6}, {"ms", 1e3}, {"us", 1}, {"m", 60e6}, {"h", 3600e6},
    };
    double n;
    const char *suffix;
    if (!split_real(s, &n, &suffix))
        return false;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcasecmp(suffix, suffixes[i].name) == 0) {
            *us = n * suffixes[i].us;
            return true;
        }
    }
    return false;
}

/* wrk's format_units(): the "two ahead" loop condition means the last unit of
 * each ladder is never used (hours never show, 1 h prints as 60.00m). */
static char *format(long double n, const struct ladder *l, int decimals, char buf[UNITS_BUF])
{
    long double amount = n;
    const char *unit = l->base;
    for (int i = 0; l->units[i + 1] && amount >= l->scale * 0.85L; i++) {
        amount /= l->scale;
        unit = l->units[i];
    }
    snprintf(buf, UNITS_BUF, "%.*Lf%s", decimals, amount, unit);
    return buf;
}

char *units_time_us(long double us, char buf[UNITS_BUF])
{
    if (us >= 1000000.0L)
        return format(us / 1000000.0L, &time_s, 2, buf);
    return format(us, &time_us, 2, buf);
}

char *units_metric(long double n, char buf[UNITS_BUF]) { return format(n, &metric, 2, buf); }

char *units_binary(long double n, char buf[UNITS_BUF]) { return format(n, &binary, 2, buf); }

char *units_duration(uint64_t us, char buf[UNITS_BUF])
{
    if (us % 1000 != 0) {
        snprintf(buf, UNITS_BUF, "%lluus", (unsigned long long)us);
        return buf;
    }
    if (us % 1000000 != 0) {
        snprintf(buf, UNITS_BUF, "%llums", (unsigned long long)(us / 1000));
        return buf;
    }
    return format((long double)(us / 1000000), &time_s, 0, buf);
}

struct timespec units_timespec(int64_t unix_us)
{
    return (struct timespec){.tv_sec = unix_us / 1000000, .tv_nsec = unix_us % 1000000 * 1000};
}

char *units_utc_time(const struct timespec *t, char buf[UNITS_BUF])
{
    struct tm tm;
    char date[32];
    gmtime_r(&t->tv_sec, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, UNITS_BUF, "%s.%03ldZ", date, t->tv_nsec / 1000000);
    return buf;
}
