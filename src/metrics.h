/* Live metrics for Prometheus: the run's figures added up interval by
 * interval on main's thread, served at /metrics (--metrics-listen) and
 * pushed by remote write (--remote-write), from the table of figures
 * (stats.h) and the run spec. Workers never see any of it: they hand their
 * intervals to main as for the timeline.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_METRICS_H
#define VOLLEY_METRICS_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct config;
struct json;
struct result;
struct stats;
struct timeline;
struct worker;

/* The latency histograms' bucket bounds without --metrics-buckets, in us. */
#define METRICS_BUCKETS_DEFAULT                                                                    \
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000,         \
        2500000, 5000000, 10000000, 30000000
/* After the run, how long volley waits at most for remote write to deliver
 * what it has queued (longer with a longer --metrics-linger). */
#define METRICS_FLUSH_US 5000000

/* Before the run, what the options ask for: the --metrics-listen socket
 * bound (a port in use is a one-line error and exit 1), the --remote-write
 * host resolved. NULL when neither option was given. */
struct metrics *metrics_new(const struct config *cfg);
void metrics_free(struct metrics *m);

/* Serve and push from loop; the gauges read the workers' published
 * counters and the timeline's server CPU time. */
void metrics_attach(struct metrics *m, struct ev_loop *loop, struct worker **workers,
                    size_t nworkers, const struct timeline *timeline);
/* What is measured starts now, at started on the wall clock. */
void metrics_start(struct metrics *m, const struct timespec *started);
/* Each interval as the timeline writes it (start and length in us from the
 * start of what is measured): added to the totals, then served and pushed. */
void metrics_interval(struct metrics *m, const struct stats *s, uint64_t start_us,
                      uint64_t length_us);
/* After the run's final merge: the figures become the result's, exactly as
 * --json has them, and are pushed once more. */
void metrics_final(struct metrics *m, const struct result *r);
/* After the report: waits for remote write to deliver (at most
 * METRICS_FLUSH_US or the linger), serves /metrics for --metrics-linger,
 * and says on stderr what remote write could not deliver. False when
 * --remote-write-strict makes that an error. */
bool metrics_finish(struct metrics *m);

/* The "telemetry" member of the --json document: null without m. */
void metrics_json(struct json *j, const struct metrics *m);

#endif
