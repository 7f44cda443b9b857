/* Numbers and durations as wrk reads and prints them: SI and time suffixes on
 * the command line, and the unit ladders of the text report.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_UNITS_H
#define VOLLEY_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Longest string any formatter below produces, with its NUL. */
#define UNITS_BUF 64

/* "10", "1k", "2M" (k M G T P, any case, powers of 1000) -> value. False on
 * anything else: a sign, a fraction, an unknown suffix, trailing text, overflow. */
bool units_parse_metric(const char *s, uint64_t *value);
/* "30", "30s", "2m", "1h", "500ms", "1.5s", "0.25" (any case) ->
 * microseconds, exactly (a fraction to the nearest microsecond). Bare
 * numbers are seconds. False on anything else. */
bool units_parse_time(const char *s, uint64_t *us);
/* The same with a fraction ("1.5k", "0.25", "12.5ms"), for limits rather
 * than counts (--threshold): digits, optionally a point and more digits,
 * then the suffix. The time form also takes "us"; a bare number is seconds.
 * False on anything else, a sign or an exponent included. */
bool units_parse_real_metric(const char *s, double *value);
bool units_parse_real_time(const char *s, double *us);
/* An instant as RFC 3339 ("2026-11-23T10:16:42.981Z", "...T11:16:42+01:00";
 * any number of fraction digits, read to the microsecond) or as Unix time in
 * seconds ("1795430202", "1795430202.5") -> microseconds since 1970. False
 * on anything else, an impossible date or an instant before 1970. */
bool units_parse_instant(const char *s, int64_t *unix_us);

/* wrk's report formatters: each walks its unit ladder while the amount is at
 * least 0.85 of the next step (never reaching the last unit listed). */
char *units_time_us(long double us, char buf[UNITS_BUF]); /* 635.91us 1.62ms 2.00s 0.85m */
char *units_metric(long double n, char buf[UNITS_BUF]);   /* 239.17 56.20k 0.85M */
char *units_binary(long double n, char buf[UNITS_BUF]);   /* 125.00 0.85K 1.77G (append B) */
/* A duration for "Running <D> test": whole seconds as wrk prints them
 * (10s, 1m, 60m), "1500ms" for one that is not a whole number of seconds and
 * "1500us" for one that is not a whole number of milliseconds. */
char *units_duration(uint64_t us, char buf[UNITS_BUF]);
/* A wall-clock time in UTC, ISO 8601 with milliseconds: "2024-05-01T12:00:00.123Z". */
char *units_utc_time(const struct timespec *t, char buf[UNITS_BUF]);
/* Unix time in microseconds as a struct timespec. */
struct timespec units_timespec(int64_t unix_us);

#endif
