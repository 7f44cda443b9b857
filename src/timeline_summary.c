/* A summary of the intervals written: how steady the throughput was and
 * how far the 99th percentile moved (the "intervals" member of --json),
 * and the last interval, for the progress line.
 * SPDX-License-Identifier: MIT */
#include "timeline_summary.h"

#include <math.h>

#include "hist.h"
#include "json.h"
#include "spec.h"

static double per_sec(uint64_t n, uint64_t us) { return us ? (double)n * 1e6 / (double)us : 0; }

void timeline_summary_add(struct timeline_summary *t, const struct timeline_record *r,
                          uint64_t interval_us)
{
    const struct hist *latency = r->s->latency;
    double rate = per_sec(r->s->requests, r->length_us);
    t->count++;
    if (r->length_us >= interval_us) {
        t->rps.min = t->rps.n == 0 || rate < t->rps.min ? rate : t->rps.min;
        t->rps.max = t->rps.n == 0 || rate > t->rps.max ? rate : t->rps.max;
        t->rps.sum += rate;
        t->rps.sum_sq += rate * rate;
        t->rps.n++;
    }
    t->last.known = true;
    t->last.rate = rate;
    t->last.has_p99 = hist_count(latency) > 0;
    if (t->last.has_p99) {
        uint64_t p99 = hist_value_at_percentile(latency, 99);
        t->last.p99 = p99;
        t->p99.min = t->p99.n == 0 || p99 < t->p99.min ? p99 : t->p99.min;
        t->p99.max = t->p99.n == 0 || p99 > t->p99.max ? p99 : t->p99.max;
        t->p99.n++;
    }
}

bool timeline_summary_last(const struct timeline_summary *t, double *rate, uint64_t *p99,
                           bool *has_p99)
{
    *rate = t->last.rate;
    *p99 = t->last.p99;
    *has_p99 = t->last.has_p99;
    return t->last.known;
}

void timeline_summary_json(struct json *j, const struct timeline_summary *t,
                           const struct run_spec *spec)
{
    /* volley merge of results without their timelines: no intervals known */
    if (!spec->interval_us) {
        json_null(j, "intervals");
        return;
    }
    json_object_begin(j, "intervals");
    json_uint(j, "interval_us", spec->interval_us);
    json_uint(j, "count", t->count);
    json_string(j, "timeline", spec->timeline);
    json_string(j, "hdr_log", spec->hdr_log);
    json_object_begin(j, "requests_per_sec");
    json_uint(j, "count", t->rps.n);
    if (t->rps.n) {
        double n = (double)t->rps.n, mean = t->rps.sum / n;
        double var = t->rps.n > 1 ? (t->rps.sum_sq - n * mean * mean) / (n - 1) : 0;
        json_double(j, "min", t->rps.min);
        json_double(j, "max", t->rps.max);
        json_double(j, "mean", mean);
        json_double(j, "stdev", var > 0 ? sqrt(var) : 0);
    } else {
        json_null(j, "min");
        json_null(j, "max");
        json_null(j, "mean");
        json_null(j, "stdev");
    }
    json_object_end(j);
    json_object_begin(j, "latency_p99");
    if (t->p99.n) {
        json_uint(j, "min", t->p99.min);
        json_uint(j, "max", t->p99.max);
    } else {
        json_null(j, "min");
        json_null(j, "max");
    }
    json_object_end(j);
    json_object_end(j);
}
