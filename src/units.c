/* Parsing of the command line's numbers and durations, and the report's unit
 * ladders, reproducing wrk's output digit for digit (wrk-spec §1.3, §2.2).
 * SPDX-License-Identifier: MIT */
#include "units.h"

#include <ctype.h>
#include <stdio.h>
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

/* Splits "<digits><spaces><suffix>" into the number and the suffix. Leading
 * spaces are allowed as wrk's sscanf allows them; signs are not (wrk would
 * wrap "-1" round to 2^64 - 1). */
static bool split_number(const char *s, uint64_t *n, const char **suffix)
{
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return false;
    uint64_t v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
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

bool units_parse_metric(const char *s, uint64_t *value)
{
    static const char *const suffixes = "kmgtp";
    uint64_t n, factor = 1;
    const char *suffix;
    if (!split_number(s, &n, &suffix))
        return false;
    if (*suffix) {
        const char *p = suffix[1] ? NULL : strchr(suffixes, tolower((unsigned char)*suffix));
        if (!p)
            return false;
        for (const char *q = suffixes; q <= p; q++)
            factor *= 1000;
    }
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
    uint64_t n;
    const char *suffix;
    if (!split_number(s, &n, &suffix))
        return false;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (strcasecmp(suffix, suffixes[i].name) == 0)
            return scale(n, suffixes[i].us, us);
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
    if (us % 1000000 != 0) {
        snprintf(buf, UNITS_BUF, "%llums", (unsigned long long)(us / 1000));
        return buf;
    }
    return format((long double)(us / 1000000), &time_s, 0, buf);
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
