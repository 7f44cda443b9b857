/* Log-linear histogram of non-negative integer values (microseconds for latency,
 * requests/second for throughput samples), laid out exactly like an HdrHistogram
 * with lowest discernible value 1 and 3 significant digits, so it merges by
 * adding counts and encodes to HdrHistogram's standard compressed form.
 * One histogram per worker thread; merged after the threads are joined.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_HIST_H
#define VOLLEY_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hist;

/* A histogram tracking 0..highest (2 <= highest <= INT64_MAX, dies otherwise);
 * larger values are recorded as highest (they count, in every statistic, as
 * highest). Memory depends only on highest: about 230 KB for 24 h in us. */
struct hist *hist_new(uint64_t highest);
void hist_free(struct hist *h);
void hist_reset(struct hist *h);

void hist_record(struct hist *h, uint64_t value);
void hist_record_n(struct hist *h, uint64_t value, uint64_t n);
/* Adds src's samples to dst (same highest). */
void hist_merge(struct hist *dst, const struct hist *src);

uint64_t hist_count(const struct hist *h);
/* Exact smallest / largest recorded value; min is UINT64_MAX and max 0 when empty. */
uint64_t hist_min(const struct hist *h);
uint64_t hist_max(const struct hist *h);
/* Exact mean and sample standard deviation (n - 1) of the recorded values,
 * from running sums; 0 when there are no (or, for stdev, fewer than 2) samples. */
double hist_mean(const struct hist *h);
double hist_stdev(const struct hist *h);
/* Percentage of samples within [mean - stdev, mean + stdev], each bucket
 * counting at its hist_distinct_at value; NaN (negative, as wrk's 0.0 / 0
 * prints "-nan") when empty. */
double hist_within_stdev(const struct hist *h, double mean, double stdev);

/* The exact sum of the recorded values, as a double. */
double hist_sum(const struct hist *h);
/* For each of the n bounds, ascending: how many samples are at most it, as
 * HdrHistogram counts them (getCountBetweenValues(0, bound)): every sample
 * of the bucket holding bound counts, so the count may take in values up to
 * its highest equivalent value (0.1% above it). For Prometheus' cumulative
 * buckets. */
void hist_count_at_most(const struct hist *h, const uint64_t *bounds, size_t n, uint64_t *counts);

/* wrk's percentile: rank = round(p / 100 * count + 0.5) clamped to 1..count,
 * then the first bucket whose cumulative count reaches rank; its highest
 * equivalent value capped at the exact max (so exact below 2048); p >= 100
 * gives max; 0 when empty. */
uint64_t hist_percentile(const struct hist *h, double p);
/* HdrHistogram's getValueAtPercentile, exactly as the Python hdrh package
 * computes it from hist_encode's output: rank = max(1, (uint64)(min(p, 100) *
 * count / 100 + 0.5)), value = highest equivalent value of the bucket reaching
 * it (lowest equivalent value for p == 0). Not capped at max: hdrh and
 * HdrHistogram_c do not cap either. 0 when empty. */
uint64_t hist_value_at_percentile(const struct hist *h, double p);

/* Distinct recorded values (non-empty buckets), in ascending order, for
 * Lua's #stats and stats(i). The value is the bucket's lowest equivalent value
 * (exact below 2048, up to 0.1% low above). i is 0-based; false when out of
 * range. Sequential calls with i, i + 1, ... are O(1) amortised (a cursor is
 * cached in the histogram, so concurrent readers of one histogram must not
 * call this). */
size_t hist_distinct(const struct hist *h);
bool hist_distinct_at(const struct hist *h, size_t i, uint64_t *value, uint64_t *count);

/* HdrHistogram's percentile iterator (as in wrk2's detailed spectrum and
 * HdrHistogram's outputPercentileDistribution): ticks_per_half_distance steps
 * per halving of the remaining distance to 100%, then a final 100% row. An
 * empty histogram gives no rows (as in Java and hdrh). */
struct hist_iter {
    const struct hist *h;
    uint64_t value;      /* highest equivalent value of the current bucket */
    double percentile;   /* 0..100 */
    uint64_t cumulative; /* samples <= value */
    /* private */
    int _ticks;
    double _percentile_to_iterate_to;
    uint64_t _index, _count_to_index, _total;
    bool _reached_last, _done;
};
void hist_iter_init(struct hist_iter *it, const struct hist *h, int ticks_per_half_distance);
bool hist_iter_next(struct hist_iter *it);

/* The histogram in HdrHistogram's V2 compressed encoding, base64 (the
 * "HISTFAAA..." form every HdrHistogram library decodes). Caller frees. */
char *hist_encode(const struct hist *h);

/* Reads hist_encode's output back (volley merge reads results written on
 * other machines): base64, HdrHistogram's V2 compressed form as hist_encode
 * writes it (a zlib stream of stored blocks; deflate-compressed ones are
 * refused), lowest discernible value 1 and 3 significant digits. The counts
 * are exact; until hist_set_summary, each bucket's samples count as its
 * lowest equivalent value. NULL with *why set for anything else. */
struct hist *hist_decode(const char *text, const char **why);
/* The exact figures the buckets cannot hold, as a result document records
 * them: false (and h unchanged) if they cannot describe h's samples. */
bool hist_set_summary(struct hist *h, uint64_t min, uint64_t max, double mean, double stdev);
/* The highest trackable value, to see whether two histograms merge. */
uint64_t hist_highest(const struct hist *h);

/* Geometry, for the report's footer: buckets and sub-buckets. */
int hist_bucket_count(const struct hist *h);
int hist_sub_bucket_count(const struct hist *h);

#endif
