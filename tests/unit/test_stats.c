/* Unit tests for src/stats.c: a reset leaves nothing recorded, whatever the
 * field, and intervals merged one by one give the whole.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include "hist.h"
#include "stats.h"

/* Records into s as a connection would, value v and friends. */
static void record(struct stats *s, uint64_t v)
{
    s->requests++;
    s->sent++;
    s->bytes += 100 + v;
    s->connects += v % 3 == 0;
    s->reopened += v % 6 == 0;
    s->errors.read += v % 5 == 0;
    s->causes[CAUSE_RESET] += v % 5 == 0;
    s->status[v % 7 == 0 ? 503 : 200]++;
    s->errors.status += v % 7 == 0;
    /* each distribution of the table, a value of its own */
    for (size_t i = 0; i < stats_ndists; i++)
        hist_record(stats_dist_get(s, &stats_dists[i]), 100 * i + v * (i + 1) % 9973);
}

/* dst takes src's histogram pointers, the fields stats_reset() keeps. */
static void histograms_of(struct stats *dst, const struct stats *src)
{
    for (size_t i = 0; i < stats_ndists; i++) {
        size_t at = stats_dists[i].offset;
        memcpy((char *)dst + at, (const char *)src + at, sizeof(struct hist *));
    }
}

/* Nothing recorded: every counter 0, but a minimum (STATS_MIN), which is
 * UINT64_MAX until a value comes. */
static void nothing_recorded(struct stats *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < stats_ncounters; i++)
        if (stats_counters[i].rule == STATS_MIN)
            *stats_counter_at(s, &stats_counters[i]) = UINT64_MAX;
}

TEST(reset_clears_every_field_and_keeps_the_histograms)
{
    struct stats s;
    stats_init(&s);
    struct hist *latency = s.latency;
    /* Every byte outside the histogram pointers set: a field added later
     * is cleared too. */
    struct stats saved = s;
    memset(&s, 0xA5, sizeof s);
    histograms_of(&s, &saved);
    for (uint64_t v = 1; v < 100000; v *= 3)
        hist_record(s.latency, v * 1000);
    stats_reset(&s);
    CHECK(s.latency == latency);
    struct stats zero;
    nothing_recorded(&zero);
    histograms_of(&zero, &s);
    CHECK(memcmp(&s, &zero, sizeof s) == 0);
    CHECK_U64(hist_count(s.latency), 0);
    /* No slot survives: a value recorded after the reset encodes alone. */
    hist_record(s.latency, 5);
    struct hist *fresh = hist_new(STATS_LATENCY_MAX);
    hist_record(fresh, 5);
    char *a = hist_encode(s.latency), *b = hist_encode(fresh);
    CHECK_STR(a, b);
    free(a);
    free(b);
    hist_free(fresh);
    stats_free(&s);
}

TEST(intervals_merged_give_the_whole)
{
    struct stats whole, interval, total;
    stats_init(&whole);
    stats_init(&interval);
    stats_init(&total);
    for (uint64_t v = 1; v <= 5000; v++) {
        record(&whole, v);
        record(&interval, v);
        if (v % 777 == 0) { /* a boundary */
            stats_merge(&total, &interval);
            stats_reset(&interval);
        }
    }
    stats_merge(&total, &interval);
    CHECK_U64(total.requests, whole.requests);
    CHECK_U64(total.bytes, whole.bytes);
    CHECK_U64(total.connects, whole.connects);
    CHECK_U64(total.reopened, whole.reopened);
    CHECK_U64(total.errors.read, whole.errors.read);
    CHECK_U64(total.errors.status, whole.errors.status);
    CHECK_U64(total.causes[CAUSE_RESET], whole.causes[CAUSE_RESET]);
    CHECK(memcmp(total.status, whole.status, sizeof whole.status) == 0);
    CHECK_U64(stats_errors(&total), whole.errors.read + whole.errors.status);
    for (size_t i = 0; i < stats_ndists; i++) {
        const struct hist *t = stats_dist_get(&total, &stats_dists[i]);
        const struct hist *w = stats_dist_get(&whole, &stats_dists[i]);
        char *a = hist_encode(t), *b = hist_encode(w);
        CHECK(hist_count(w) == 5000);
        CHECK_STR(a, b);
        CHECK(hist_mean(t) == hist_mean(w));
        free(a);
        free(b);
    }
    stats_free(&whole);
    stats_free(&interval);
    stats_free(&total);
}
