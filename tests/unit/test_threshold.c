/* Unit tests for src/threshold.c: the grammar (every metric and operator,
 * units, percentages, and one clear reason for each bad expression), the
 * metrics as the JSON document computes them, timed out requests in
 * latency percentiles, the verdict lines, and the interval-by-interval
 * watch of --abort-on-fail.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include <math.h>

#include "hist.h"
#include "stats.h"
#include "threshold.h"

static struct threshold parse(const char *expr)
{
    struct threshold t;
    char err[256];
    if (!threshold_parse(expr, &t, err, sizeof err)) {
        UNIT_FAIL("'%s' was refused: %s", expr, err);
        memset(&t, 0, sizeof t);
    }
    return t;
}

/* The reason a bad expression is refused. */
static const char *refused(const char *expr)
{
    static char err[256];
    struct threshold t;
    if (threshold_parse(expr, &t, err, sizeof err)) {
        threshold_free(&t);
        return "(accepted)";
    }
    return err;
}

TEST(parses_each_metric_operator_and_unit)
{
    struct threshold t = parse("p99<200ms");
    CHECK(t.metric == THRESHOLD_PERCENTILE && t.percentile == 99);
    CHECK(t.op == THRESHOLD_LT && t.limit == 200000);
    CHECK_STR(t.text, "p99 < 200ms");
    threshold_free(&t);

    t = parse("  P99.9  <=  1.5s ");
    CHECK(t.percentile == 99.9 && t.op == THRESHOLD_LE && t.limit == 1.5e6);
    CHECK_STR(t.text, "p99.9 <= 1.5s");
    threshold_free(&t);

    t = parse("mean > 250us");
    CHECK(t.metric == THRESHOLD_MEAN && t.op == THRESHOLD_GT && t.limit == 250);
    threshold_free(&t);
    t = parse("max>=2m");
    CHECK(t.metric == THRESHOLD_MAX && t.op == THRESHOLD_GE && t.limit == 120e6);
    threshold_free(&t);
    t = parse("stdev < 5ms");
    CHECK(t.metric == THRESHOLD_STDEV);
    threshold_free(&t);
    t = parse("connect < 10ms");
    CHECK(t.metric == THRESHOLD_CONNECT && t.limit == 10000);
    threshold_free(&t);
    t = parse("rps >= 1.5k");
    CHECK(t.metric == THRESHOLD_RPS && t.limit == 1500);
    threshold_free(&t);
    t = parse("requests > 10k");
    CHECK(t.metric == THRESHOLD_REQUESTS && t.limit == 10000 && !t.percent);
    threshold_free(&t);
    t = parse("errors <= 0");
    CHECK(t.metric == THRESHOLD_ERRORS && t.limit == 0 && !t.percent);
    threshold_free(&t);
    t = parse("errors < 0.1%");
    CHECK(t.metric == THRESHOLD_ERRORS && t.limit == 0.1 && t.percent);
    threshold_free(&t);
    t = parse("success >= 99.9%");
    CHECK(t.metric == THRESHOLD_SUCCESS && t.limit == 99.9 && t.percent);
    threshold_free(&t);
    t = parse("status:5xx < 1%");
    CHECK(t.metric == THRESHOLD_STATUS && t.status_lo == 500 && t.status_hi == 599 && t.percent);
    CHECK_STR(t.text, "status:5xx < 1%");
    threshold_free(&t);
    t = parse("status:503<=10");
    CHECK(t.status_lo == 503 && t.status_hi == 503 && !t.percent && t.limit == 10);
    threshold_free(&t);
    t = parse("p100 < 1h");
    CHECK(t.percentile == 100 && t.limit == 3600e6);
    threshold_free(&t);
}

TEST(refuses_malformed_expressions_with_a_reason)
{
    CHECK_STR(refused(""), "expected METRIC OP VALUE, as in 'p99 < 200ms'");
    CHECK_STR(refused("< 5ms"), "expected METRIC OP VALUE, as in 'p99 < 200ms'");
    CHECK_STR(refused("p99"), "expected <, <=, > or >= after 'p99'");
    CHECK_STR(refused("p99 = 5ms"), "expected <, <=, > or >= after 'p99'");
    CHECK_STR(refused("p99 <"), "missing the value after 'p99 <'");
    CHECK_STR(refused("p99 < 200"), "a latency needs a unit: '200ms' or '200s'");
    CHECK_STR(refused("p99 < fast"), "invalid latency 'fast': expected a time such as 200ms");
    CHECK_STR(refused("p99 < 5%"), "p99 is not a percentage: '5%'");
    CHECK_STR(refused("p0 < 5ms"), "invalid percentile 'p0': from p0.001 to p100");
    CHECK_STR(refused("p101 < 5ms"), "invalid percentile 'p101': from p0.001 to p100");
    CHECK_STR(refused("p9x < 5ms"), "invalid percentile 'p9x': from p0.001 to p100");
    CHECK_STR(refused("latency < 5ms"),
              "unknown metric 'latency' (p50, p99.9, mean, max, stdev, connect, rps, requests, "
              "errors, success, status:5xx, status:503)");
    CHECK_STR(refused("success > 99"), "success is a percentage: '99%'");
    CHECK_STR(refused("errors < 101%"), "invalid percentage '101%': at most 100%");
    CHECK_STR(refused("errors < 1k%"), "invalid percentage '1k%'");
    CHECK_STR(refused("errors < lots"), "invalid number 'lots'");
    CHECK_STR(refused("rps > 5%"), "rps is not a percentage: '5%'");
    CHECK_STR(refused("status:5x < 1"), "invalid status '5x': a code (status:503) or a class "
                                        "(status:5xx)");
    CHECK_STR(refused("status:abc < 1"), "invalid status 'abc': a code (status:503) or a class "
                                         "(status:5xx)");
    CHECK_STR(refused("p99 < 5ms extra"), "invalid latency '5ms extra': expected a time such as "
                                          "200ms");
}

TEST(a_latency_metric_may_name_its_distribution_first)
{
    struct threshold t = parse("ttfb p99 < 50ms");
    CHECK(t.metric == THRESHOLD_PERCENTILE && t.percentile == 99 && t.limit == 50000);
    CHECK(t.dist == STATS_DIST_ttfb);
    CHECK_STR(t.text, "ttfb p99 < 50ms");
    CHECK_U64(t.name_len, strlen("ttfb p99"));
    threshold_free(&t);
    t = parse("  TTFB   Mean<=1s");
    CHECK(t.metric == THRESHOLD_MEAN && t.dist == STATS_DIST_ttfb && t.op == THRESHOLD_LE);
    CHECK_STR(t.text, "ttfb mean <= 1s");
    threshold_free(&t);
    t = parse("latency max < 2s");
    CHECK(t.metric == THRESHOLD_MAX && t.dist == STATS_DIST_latency);
    threshold_free(&t);
    t = parse("p99 < 1s");
    CHECK(t.dist == STATS_DIST_latency);
    threshold_free(&t);
    CHECK_STR(refused("ttfb rps > 1"),
              "unknown metric 'ttfb rps' (after ttfb: pN, mean, max or stdev)");
    CHECK_STR(refused("ttfb p99 < 5%"), "ttfb p99 is not a percentage: '5%'");
    CHECK_STR(refused("ttfb p99"), "expected <, <=, > or >= after 'ttfb p99'");
    CHECK_STR(refused("connect p99 < 1s"), "expected <, <=, > or >= after 'connect'");
}

/* 100 responses of 1..100 ms (status 200, the last 25 of them 503), and
 * timeouts timed out requests. */
static void fill(struct stats *s, uint64_t timeouts)
{
    stats_init(s);
    for (uint64_t i = 1; i <= 100; i++) {
        hist_record(s->latency, i * 1000);
        s->requests++;
        s->status[i > 75 ? 503 : 200]++;
        s->errors.status += i > 75;
    }
    hist_record(s->connect, 300);
    s->errors.timeout = timeouts;
}

static struct threshold_value measure(const char *expr, const struct stats *s)
{
    struct threshold t = parse(expr);
    struct threshold_value v = threshold_measure(&t, s, 2000000, 1000000);
    threshold_free(&t);
    return v;
}

TEST(measures_as_the_json_document_does)
{
    struct stats s;
    fill(&s, 0);
    CHECK_DBL(measure("p50 < 1s", &s).value, hist_value_at_percentile(s.latency, 50), 0);
    CHECK_DBL(measure("p99.9 < 1s", &s).value, hist_value_at_percentile(s.latency, 99.9), 0);
    CHECK_DBL(measure("max < 1s", &s).value, 100000, 0);
    CHECK_DBL(measure("mean < 1s", &s).value, 50500, 0.001);
    CHECK_DBL(measure("stdev < 1s", &s).value, hist_stdev(s.latency), 0);
    CHECK_DBL(measure("connect < 1s", &s).value, 300, 0);
    CHECK_DBL(measure("rps > 1", &s).value, 50, 0); /* 100 in 2 s */
    CHECK_DBL(measure("requests > 1", &s).value, 100, 0);
    CHECK_DBL(measure("errors < 1", &s).value, 25, 0);
    CHECK_DBL(measure("errors < 1%", &s).value, 25, 0);
    CHECK_DBL(measure("success > 1%", &s).value, 75, 0);
    CHECK_DBL(measure("status:5xx < 1%", &s).value, 25, 0);
    CHECK_DBL(measure("status:503 < 1", &s).value, 25, 0);
    CHECK_DBL(measure("status:2xx > 1", &s).value, 75, 0);
    CHECK_DBL(measure("status:404 < 1", &s).value, 0, 0);
    /* A socket error is a failed attempt: it counts in errors and success. */
    /* the time to first byte: its own distribution */
    for (uint64_t i = 1; i <= 100; i++)
        hist_record(s.ttfb, i * 100);
    CHECK_DBL(measure("ttfb p50 < 1s", &s).value, hist_value_at_percentile(s.ttfb, 50), 0);
    CHECK_DBL(measure("ttfb max < 1s", &s).value, 10000, 0);
    CHECK_DBL(measure("ttfb mean < 1s", &s).value, 5050, 0.001);
    s.errors.read = 25;
    CHECK_DBL(measure("errors < 1%", &s).value, 40, 0);
    CHECK_DBL(measure("success > 1%", &s).value, 60, 0);
    CHECK_DBL(measure("status:5xx < 1%", &s).value, 25, 0); /* of responses */
    stats_free(&s);
}

TEST(nothing_measured_is_not_known_and_fails)
{
    struct stats s;
    stats_init(&s);
    const char *exprs[] = {"p99 < 1s",    "mean < 1s",    "max < 1s",       "connect < 1s",
                           "errors < 1%", "success > 1%", "status:5xx < 1%"};
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
        struct threshold t = parse(exprs[i]);
        struct threshold_value v = threshold_measure(&t, &s, 1000000, 1000000);
        if (v.known || threshold_holds(&t, &v))
            UNIT_FAIL("%s: known or passed with nothing measured", exprs[i]);
        threshold_free(&t);
    }
    CHECK(measure("requests < 1", &s).known && measure("errors < 1", &s).known);
    stats_free(&s);
}

TEST(timed_out_requests_are_the_slowest)
{
    struct stats s;
    fill(&s, 10); /* 110 requests, the 10 slowest timed out */
    struct threshold t = parse("p95 < 10h");
    struct threshold_value v = threshold_measure(&t, &s, 1000000, 1000000);
    CHECK(v.known && v.timeouts && v.value == 1000000);
    CHECK(!threshold_holds(&t, &v)); /* slower than any limit */
    threshold_free(&t);
    t = parse("p95 > 1ms");
    CHECK(threshold_holds(&t, &v));
    threshold_free(&t);
    /* p90 of 110 is rank 99: a response, 99 ms (bucket's highest value). */
    v = measure("p90 < 1s", &s);
    CHECK(v.known && !v.timeouts);
    CHECK_DBL(v.value, hist_value_at_percentile(s.latency, 99), 0);
    CHECK(measure("max < 1s", &s).timeouts);
    CHECK(!measure("mean < 1s", &s).timeouts); /* over the responses */
    stats_free(&s);
}

TEST(operators_at_the_limit)
{
    struct stats s;
    fill(&s, 0);
    const struct {
        const char *expr;
        bool holds;
    } cases[] = {
        {"errors < 25", false},         {"errors <= 25", true},     {"errors > 25", false},
        {"errors >= 25", true},         {"errors < 25.5", true},    {"success >= 75%", true},
        {"success > 75%", false},       {"max <= 100ms", true},     {"max < 100ms", false},
        {"requests >= 0.1k", true},     {"requests > 0.1k", false}, {"status:5xx <= 25%", true},
        {"status:5xx < 24.99%", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct threshold t = parse(cases[i].expr);
        struct threshold_value v = threshold_measure(&t, &s, 1000000, 1000000);
        if (threshold_holds(&t, &v) != cases[i].holds)
            UNIT_FAIL("%s: %s with %g", cases[i].expr, cases[i].holds ? "failed" : "held", v.value);
        threshold_free(&t);
    }
    stats_free(&s);
}

/* What threshold_print wrote. */
static char *printed(const struct threshold_verdict *v, size_t n, const struct threshold_abort *a)
{
    static char text[2048];
    FILE *f = fmemopen(text, sizeof text, "w");
    threshold_print(f, v, n, a);
    fclose(f);
    return text;
}

TEST(verdict_lines)
{
    struct stats s;
    fill(&s, 0);
    struct threshold ts[5];
    ts[0] = parse("p99 < 200ms");
    ts[1] = parse("errors < 1%");
    ts[2] = parse("rps >= 10");
    ts[3] = parse("requests > 99");
    ts[4] = parse("connect < 1ms");
    struct threshold_verdict v[5];
    CHECK(!threshold_judge(ts, 5, &s, NULL, 2000000, 1000000, NULL, v));
    CHECK(v[0].passed && !v[1].passed && v[2].passed && v[3].passed && v[4].passed);
    CHECK_STR(printed(v, 5, NULL), "Threshold p99 < 200ms: passed (p99 = 99.01ms)\n"
                                   "Threshold errors < 1%: FAILED (errors = 25%)\n"
                                   "Threshold rps >= 10: passed (rps = 50.00)\n"
                                   "Threshold requests > 99: passed (requests = 100)\n"
                                   "Threshold connect < 1ms: passed (connect = 300.00us)\n");
    /* The threshold that stopped the run failed, whatever its value. */
    struct threshold_abort a = {0, 4, 5, 2000000, 3000000};
    CHECK(!threshold_judge(ts, 1, &s, NULL, 2000000, 1000000, &a, v));
    CHECK_STR(printed(v, 1, &a), "Threshold p99 < 200ms: FAILED (p99 = 99.01ms; failed in 2 "
                                 "intervals in a row, 2.00s to 3.00s: the run was stopped)\n");
    stats_free(&s);
    stats_init(&s);
    s.errors.timeout = 3;
    CHECK(!threshold_judge(ts, 2, &s, NULL, 2000000, 1000000, NULL, v));
    CHECK_STR(printed(v, 2, NULL),
              "Threshold p99 < 200ms: FAILED (p99 >= 1.00s: requests timed out)\n"
              "Threshold errors < 1%: FAILED (errors = 100%)\n");
    stats_reset(&s);
    CHECK(!threshold_judge(ts, 1, &s, NULL, 2000000, 1000000, NULL, v));
    CHECK_STR(printed(v, 1, NULL), "Threshold p99 < 200ms: FAILED (p99: nothing measured)\n");
    /* connect over a --warmup: its connections count with the run's (here,
     * the only ones) */
    struct hist *warm = hist_new(STATS_LATENCY_MAX);
    hist_record(warm, 800);
    CHECK(!threshold_judge(&ts[4], 1, &s, NULL, 2000000, 1000000, NULL, v));
    CHECK(threshold_judge(&ts[4], 1, &s, warm, 2000000, 1000000, NULL, v));
    CHECK_STR(printed(v, 1, NULL), "Threshold connect < 1ms: passed (connect = 800.00us)\n");
    hist_free(warm);
    for (size_t i = 0; i < 5; i++)
        threshold_free(&ts[i]);
    stats_free(&s);
}

/* An interval of n responses of latency us, and errors socket errors. */
static void interval(struct stats *s, uint64_t n, uint64_t us, uint64_t errors)
{
    stats_reset(s);
    s->requests = n;
    s->status[200] = n;
    hist_record_n(s->latency, us, n);
    s->errors.read = errors;
}

TEST(watch_stops_after_n_failing_intervals_in_a_row)
{
    struct stats s;
    struct threshold_abort a;
    stats_init(&s);
    struct threshold t = parse("p99 < 50ms");
    struct threshold_watch *w = threshold_watch_new(&t, 1, 2, 1000000);
    interval(&s, 10, 1000, 0);
    CHECK(!threshold_watch_interval(w, &s, 0, 0, 500000, &a));
    interval(&s, 10, 90000, 0);
    CHECK(!threshold_watch_interval(w, &s, 1, 500000, 500000, &a)); /* one */
    interval(&s, 10, 1000, 0);
    CHECK(!threshold_watch_interval(w, &s, 2, 1000000, 500000, &a)); /* the run is broken */
    interval(&s, 10, 90000, 0);
    CHECK(!threshold_watch_interval(w, &s, 3, 1500000, 500000, &a));
    interval(&s, 0, 0, 0); /* nothing answered: no verdict either way */
    CHECK(!threshold_watch_interval(w, &s, 4, 2000000, 500000, &a));
    interval(&s, 10, 90000, 0);
    CHECK(threshold_watch_interval(w, &s, 5, 2500000, 500000, &a));
    CHECK(a.threshold == 0 && a.first == 3 && a.last == 5);
    CHECK(a.from_us == 1500000 && a.to_us == 3000000);
    threshold_watch_free(w);
    threshold_free(&t);
    stats_free(&s);
}

TEST(watch_counts_totals_and_leaves_reaching_a_figure_to_the_end)
{
    struct stats s;
    struct threshold_abort a;
    stats_init(&s);
    struct threshold ts[2] = {parse("requests > 1k"), parse("errors < 5")};
    struct threshold_watch *w = threshold_watch_new(ts, 2, 1, 1000000);
    interval(&s, 10, 1000, 2);
    CHECK(!threshold_watch_interval(w, &s, 0, 0, 1000000, &a)); /* 2 errors, 10 requests */
    interval(&s, 10, 1000, 2);
    CHECK(!threshold_watch_interval(w, &s, 1, 1000000, 1000000, &a)); /* 4 */
    interval(&s, 10, 1000, 1);
    CHECK(threshold_watch_interval(w, &s, 2, 2000000, 1000000, &a)); /* 5 in all */
    CHECK(a.threshold == 1 && a.first == 2 && a.last == 2);
    threshold_watch_free(w);
    threshold_free(&ts[0]);
    threshold_free(&ts[1]);
    stats_free(&s);
}

TEST(watch_sees_a_stall_through_its_timeouts)
{
    struct stats s;
    struct threshold_abort a;
    stats_init(&s);
    struct threshold t = parse("p99 < 50ms");
    struct threshold_watch *w = threshold_watch_new(&t, 1, 1, 1000000);
    interval(&s, 0, 0, 0);
    s.errors.timeout = 4;
    CHECK(threshold_watch_interval(w, &s, 6, 3000000, 500000, &a));
    threshold_watch_free(w);
    threshold_free(&t);
    stats_free(&s);
}
