/* Number/time parsing and wrk's report formatters, against the examples of
 * wrk-spec §1.3, §2.2 and §2.3.
 * SPDX-License-Identifier: MIT */
#include <math.h>

#include "report.h"
#include "unit.h"
#include "units.h"

static uint64_t metric(const char *s)
{
    uint64_t v = 12345;
    return units_parse_metric(s, &v) ? v : UINT64_MAX;
}

static uint64_t timeus(const char *s)
{
    uint64_t v = 12345;
    return units_parse_time(s, &v) ? v : UINT64_MAX;
}

TEST(metric_plain_and_suffixes)
{
    CHECK_U64(metric("0"), 0);
    CHECK_U64(metric("10"), 10);
    CHECK_U64(metric("1k"), 1000);
    CHECK_U64(metric("1K"), 1000);
    CHECK_U64(metric("2M"), 2000000);
    CHECK_U64(metric("1m"), 1000000); /* case-insensitive, as in wrk: one million */
    CHECK_U64(metric("3g"), 3000000000ULL);
    CHECK_U64(metric("1T"), 1000000000000ULL);
    CHECK_U64(metric("1p"), 1000000000000000ULL);
    CHECK_U64(metric(" 5"), 5);
    CHECK_U64(metric("5 k"), 5000);
}

TEST(metric_rejects)
{
    const char *bad[] = {"",
                         "k",
                         "-1",
                         "+1",
                         "1.5k",
                         "1kb",
                         "0x10",
                         "1e",
                         "10s",
                         "1 k x",
                         "18446744073709551616",
                         "18446744073709552k",
                         "abc",
                         "1x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (metric(bad[i]) != UINT64_MAX)
            UNIT_FAIL("\"%s\" was accepted", bad[i]);
}

TEST(time_units)
{
    CHECK_U64(timeus("10"), 10000000);
    CHECK_U64(timeus("10s"), 10000000);
    CHECK_U64(timeus("2m"), 120000000);
    CHECK_U64(timeus("1M"), 60000000); /* -d 1M is a minute, as in wrk */
    CHECK_U64(timeus("2h"), 7200000000ULL);
    CHECK_U64(timeus("500ms"), 500000);
    CHECK_U64(timeus("500MS"), 500000);
    CHECK_U64(timeus("0"), 0);
}

TEST(time_fractions_are_exact)
{
    /* in integers: 0.1 * 1e6 as a double is 100000.00000000001 */
    CHECK_U64(timeus("0.1s"), 100000);
    CHECK_U64(timeus("1.5s"), 1500000);
    CHECK_U64(timeus("1.5"), 1500000);
    CHECK_U64(timeus("0.5"), 500000);
    CHECK_U64(timeus("0.25s"), 250000);
    CHECK_U64(timeus("2.5ms"), 2500);
    CHECK_U64(timeus("0.001ms"), 1);
    CHECK_U64(timeus("1.5m"), 90000000);
    CHECK_U64(timeus("0.1h"), 360000000);
    CHECK_U64(timeus("0.3"), 300000);
    CHECK_U64(timeus("0.7s"), 700000);
    CHECK_U64(timeus("1.000000s"), 1000000);
    /* past the microsecond: rounded, half up */
    CHECK_U64(timeus("0.0000004s"), 0);
    CHECK_U64(timeus("0.0000005s"), 1);
    CHECK_U64(timeus("0.0004ms"), 0);
    CHECK_U64(timeus("0.1234567890123456789012s"), 123457);
    CHECK_U64(timeus(" 1.5 s"), 1500000);
    CHECK_U64(timeus("18446744073709.551615s"), 18446744073709551615ULL);
}

TEST(time_rejects)
{
    const char *bad[] = {"",     "10sec", "1d",    "-1",  "s",    "5us",
                         "1k",   "1 s x", "1.s",   ".5s", "1..5", "1.5.5s",
                         "1 .5", "1e3",   "-0.5s", "+1s", "0x1s", "18446744073709.551616s",
                         "1,5s", "nan",   "1.5kms"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (timeus(bad[i]) != UINT64_MAX)
            UNIT_FAIL("\"%s\" was accepted", bad[i]);
}

static double real_metric(const char *s)
{
    double v = -1;
    return units_parse_real_metric(s, &v) ? v : -1;
}

static double real_time(const char *s)
{
    double v = -1;
    return units_parse_real_time(s, &v) ? v : -1;
}

TEST(real_numbers_with_fractions_and_suffixes)
{
    CHECK(real_metric("0") == 0);
    CHECK(real_metric("1.5k") == 1500);
    CHECK(real_metric("0.25") == 0.25);
    CHECK(real_metric("2M") == 2e6);
    CHECK(real_metric(" 3 k") == 3000);
    CHECK(real_time("200ms") == 200000);
    CHECK(real_time("12.5ms") == 12500);
    CHECK(real_time("1.5") == 1.5e6); /* bare numbers are seconds, as for -d */
    CHECK(real_time("250us") == 250);
    CHECK(real_time("0.5m") == 30e6);
    CHECK(real_time("2H") == 7200e6);
}

TEST(real_numbers_reject)
{
    const char *bad[] = {"",    ".5",  "1.",  "-1",   "+1",    "1e3", "1.5kb",
                         "1,5", "inf", "nan", "0x10", "1.2.3", "k",   "5 k x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (real_metric(bad[i]) != -1 || real_time(bad[i]) != -1)
            UNIT_FAIL("\"%s\" was accepted", bad[i]);
    CHECK(real_time("1k") == -1);
    CHECK(real_time("10sec") == -1);
    CHECK(real_metric("10s") == -1);
    char huge[400];
    memset(huge, '9', sizeof huge - 1);
    huge[sizeof huge - 1] = 0;
    CHECK(real_metric(huge) == -1); /* past a double's range */
}

static const char *t(long double us)
{
    static char buf[UNITS_BUF];
    return units_time_us(us, buf);
}

TEST(time_formatter)
{
    CHECK_STR(t(849), "849.00us");
    CHECK_STR(t(849.996L), "850.00us");
    CHECK_STR(t(850), "0.85ms");
    CHECK_STR(t(635.91L), "635.91us");
    CHECK_STR(t(999994), "999.99ms");
    CHECK_STR(t(999996), "1000.00ms");
    CHECK_STR(t(1000000), "1.00s");
    CHECK_STR(t(50990000), "50.99s");
    CHECK_STR(t(51000000), "0.85m");
    CHECK_STR(t(3600000000.0L), "60.00m");
    CHECK_STR(t(0), "0.00us");
}

TEST(metric_and_binary_formatters)
{
    char b[UNITS_BUF];
    CHECK_STR(units_metric(239.17L, b), "239.17");
    CHECK_STR(units_metric(850, b), "0.85k");
    CHECK_STR(units_metric(56200, b), "56.20k");
    CHECK_STR(units_metric(849999, b), "850.00k");
    CHECK_STR(units_metric(850000, b), "0.85M");
    CHECK_STR(units_binary(125, b), "125.00");
    CHECK_STR(units_binary(870, b), "870.00");
    CHECK_STR(units_binary(871, b), "0.85K");
    CHECK_STR(units_binary(1e9L, b), "0.93G");
    CHECK_STR(units_binary(1.9e9L, b), "1.77G");
}

TEST(duration_header)
{
    char b[UNITS_BUF];
    struct {
        uint64_t s;
        const char *want;
    } cases[] = {{10, "10s"}, {50, "50s"}, {51, "1m"},  {59, "1m"},    {60, "1m"},      {89, "1m"},
                 {90, "2m"},  {150, "2m"}, {210, "4m"}, {3600, "60m"}, {86400, "1440m"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_STR(units_duration(cases[i].s * 1000000, b), cases[i].want);
    CHECK_STR(units_duration(500000, b), "500ms");
    CHECK_STR(units_duration(1500000, b), "1500ms");
    CHECK_STR(units_duration(1500, b), "1500us");
    CHECK_STR(units_duration(250, b), "250us");
    CHECK_STR(units_duration(2000000, b), "2s");
}

static const char *cell(const char *s, int width)
{
    static char buf[64];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    report_cell(f, s, width);
    fclose(f);
    return buf;
}

TEST(column_rule)
{
    CHECK_STR(cell("635.91us", 8), "635.91us");
    CHECK_STR(cell("56.20k", 8), " 56.20k ");
    CHECK_STR(cell("239.17", 8), "239.17  ");
    CHECK_STR(cell("1.50s", 10), "    1.50s ");
    CHECK_STR(cell("1000.00ms", 8), "1000.00m");
    CHECK_STR(cell("14400.00m", 8), "14400.0 ");
    CHECK_STR(cell("0.00us", 8), "  0.00us");
}

TEST(utc_time_has_milliseconds)
{
    char buf[UNITS_BUF];
    struct timespec when = {1700000000, 999999999};
    CHECK_STR(units_utc_time(&when, buf), "2023-11-14T22:13:20.999Z");
    when = (struct timespec){0, 1000000};
    CHECK_STR(units_utc_time(&when, buf), "1970-01-01T00:00:00.001Z");
}

static int64_t instant(const char *s)
{
    int64_t us = -1;
    if (!units_parse_instant(s, &us))
        UNIT_FAIL("refused: %s", s);
    return us;
}

TEST(instants_in_rfc3339_and_unix_time)
{
    CHECK_I64(instant("1970-01-01T00:00:00Z"), 0);
    CHECK_I64(instant("2026-11-23T10:16:42.981Z"), 1795429002981000LL);
    CHECK_I64(instant("2026-11-23t10:16:42.981z"), 1795429002981000LL);
    CHECK_I64(instant("2026-11-23 10:16:42.981Z"), 1795429002981000LL);
    CHECK_I64(instant("2026-11-23T11:16:42.981+01:00"), 1795429002981000LL);
    CHECK_I64(instant("2026-11-23T05:46:42.981-04:30"), 1795429002981000LL);
    CHECK_I64(instant("2026-11-23T10:16:42.9812345678Z"), 1795429002981234LL);
    CHECK_I64(instant("2024-02-29T00:00:00Z"), 1709164800000000LL);
    CHECK_I64(instant("2016-12-31T23:59:60Z"), 1483228799999999LL); /* a leap second */
    CHECK_I64(instant("1795429002"), 1795429002000000LL);
    CHECK_I64(instant("1795429002.5"), 1795429002500000LL);
    CHECK_I64(instant("1795429002.0000019"), 1795429002000001LL);
}

TEST(instants_refused)
{
    static const char *const bad[] = {"",
                                      "now",
                                      "+2s",
                                      "-1",
                                      "1795429002.",
                                      "1795429002.5s",
                                      " 1795429002",
                                      "1e9",
                                      "99999999999999999999",
                                      "2026-11-23",
                                      "2026-11-23T10:16:42",
                                      "2026-11-23T10:16Z",
                                      "2026-11-23T10:16:42.Z",
                                      "2026-13-01T00:00:00Z",
                                      "2026-02-29T00:00:00Z",
                                      "2026-04-31T00:00:00Z",
                                      "2026-00-10T00:00:00Z",
                                      "2026-11-23T24:00:00Z",
                                      "2026-11-23T10:60:00Z",
                                      "2026-11-23T10:16:61Z",
                                      "2026-11-23T10:16:42+0100",
                                      "2026-11-23T10:16:42+24:00",
                                      "2026-11-23T10:16:42Z ",
                                      "26-11-23T10:16:42Z",
                                      "1969-12-31T23:59:59Z",
                                      "1970-01-01T00:00:00+00:01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t us;
        if (units_parse_instant(bad[i], &us))
            UNIT_FAIL("accepted \"%s\" as %" PRId64, bad[i], us);
    }
}
