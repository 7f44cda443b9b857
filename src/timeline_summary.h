/* A summary of a timeline's intervals, as they are written.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_TIMELINE_SUMMARY_H
#define VOLLEY_TIMELINE_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "timeline_file.h"

struct json;
struct run_spec;

struct timeline_summary {
    uint64_t count; /* intervals written */
    struct {
        uint64_t n;
        double min, max, sum, sum_sq;
    } rps; /* over the intervals of full length */
    struct {
        uint64_t n, min, max;
    } p99; /* over the intervals with responses */
    struct {
        bool known, has_p99;
        double rate;
        uint64_t p99;
    } last;
};

/* Interval r, written, of a run whose intervals are interval_us long. */
void timeline_summary_add(struct timeline_summary *t, const struct timeline_record *r,
                          uint64_t interval_us);
/* The last interval: its requests per second and, when it had a response,
 * its 99th percentile latency (us). False before the first. */
bool timeline_summary_last(const struct timeline_summary *t, double *rate, uint64_t *p99,
                           bool *has_p99);
/* The "intervals" member of the --json document; null when spec->interval_us
 * is 0 (volley merge without timelines). */
void timeline_summary_json(struct json *j, const struct timeline_summary *t,
                           const struct run_spec *spec);

#endif
