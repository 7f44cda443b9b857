/* Pass/fail thresholds (--threshold 'p99 < 200ms'): parsing an expression,
 * measuring its metric on a run's statistics (or on one interval's, for
 * --abort-on-fail), and saying what passed, as text lines and in --json.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_THRESHOLD_H
#define VOLLEY_THRESHOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stats.h"

struct json;

enum threshold_metric {
    THRESHOLD_PERCENTILE, /* latency pN (or another distribution's: ttfb p99) */
    THRESHOLD_MEAN,       /* latency */
    THRESHOLD_MAX,        /* latency */
    THRESHOLD_STDEV,      /* latency */
    THRESHOLD_CONNECT,    /* p99 of the connect time */
    THRESHOLD_RPS,        /* responses per second */
    THRESHOLD_REQUESTS,   /* responses */
    THRESHOLD_ERRORS,     /* socket errors and responses with status >= 400 */
    THRESHOLD_SUCCESS,    /* percent of attempts answered with status < 400 */
    THRESHOLD_STATUS,     /* responses with a status in [status_lo, status_hi] */
};

enum threshold_op { THRESHOLD_LT, THRESHOLD_LE, THRESHOLD_GT, THRESHOLD_GE };

struct threshold {
    char *text;      /* "p99 < 200ms": the expression with its spacing made even */
    size_t name_len; /* of the metric's name in text ("p99", "ttfb p99") */
    enum threshold_metric metric;
    size_t dist;       /* the distribution of a latency metric: stats_dists[dist] */
    double percentile; /* THRESHOLD_PERCENTILE */
    int status_lo, status_hi;
    bool percent; /* the limit is a percentage (errors, status, success) */
    enum threshold_op op;
    double limit; /* us for latencies, per second for rps, a count or a percentage */
};

/* What a metric came to. */
struct threshold_value {
    bool known;    /* false: nothing was measured (no response, no attempt) */
    bool timeouts; /* a latency that falls among requests that timed out: it
                      was longer than any limit, and value is --timeout */
    double value;
};

/* One threshold's verdict over a whole run. */
struct threshold_verdict {
    const struct threshold *t;
    struct threshold_value v;
    bool passed;
};

/* --abort-on-fail stopped the run: threshold failed in intervals
 * [first, last] in a row, which span [from_us, to_us) of the run. */
struct threshold_abort {
    size_t threshold;
    uint64_t first, last;
    uint64_t from_us, to_us;
};

/* Parses "METRIC OP VALUE"; false with a one-line reason in err otherwise. */
bool threshold_parse(const char *expr, struct threshold *t, char *err, size_t errlen);
void threshold_free(struct threshold *t);

/* The threshold's metric over statistics s, gathered in length_us; a
 * request that timed out (after timeout_us) counts in latency percentiles
 * and the maximum as slower than any response. */
struct threshold_value threshold_measure(const struct threshold *t, const struct stats *s,
                                         uint64_t length_us, uint64_t timeout_us);
/* Whether the value meets the threshold; a value not known does not. */
bool threshold_holds(const struct threshold *t, const struct threshold_value *v);

/* The verdicts of n thresholds over a whole run, into out[n]; the one an
 * abort names failed whatever its value. warmup_connect (or NULL): the
 * connect times of a --warmup, which connect counts with the run's, as
 * keep-alive connections opened in the warm-up are the run's too. Returns
 * whether all passed. */
bool threshold_judge(const struct threshold *ts, size_t n, const struct stats *s,
                     const struct hist *warmup_connect, uint64_t runtime_us, uint64_t timeout_us,
                     const struct threshold_abort *abort, struct threshold_verdict *out);
/* "Threshold p99 < 200ms: passed (p99 = 12.31ms)", one line each, and a
 * line saying why the run stopped early. */
void threshold_print(FILE *f, const struct threshold_verdict *v, size_t n,
                     const struct threshold_abort *abort);
/* The "thresholds" and "aborted" members of the --json document (null
 * without thresholds, and when the run was not stopped). */
void threshold_json(struct json *j, const struct threshold_verdict *v, size_t n,
                    const struct threshold_abort *abort);

/* --abort-on-fail: the thresholds checked interval by interval. */
struct threshold_watch;
/* Stop after a threshold failed in `after` intervals in a row. */
struct threshold_watch *threshold_watch_new(const struct threshold *ts, size_t n, uint64_t after,
                                            uint64_t timeout_us);
void threshold_watch_free(struct threshold_watch *w);
/* Interval index, of length_us, starting at start_us: true once the run
 * should stop (and then *abort says why). Latencies, rates and percentages
 * are the interval's own; a count held under a limit (errors < 10) is the
 * total so far, and one that must reach a figure is left for the end. An
 * interval without the figure (no response in it) does not count against a
 * threshold. */
bool threshold_watch_interval(struct threshold_watch *w, const struct stats *s, uint64_t index,
                              uint64_t start_us, uint64_t length_us, struct threshold_abort *abort);

#endif
