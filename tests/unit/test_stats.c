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
    hist_record(s->latency, v * 37);
    hist_record(s->u_latency, v);
    hist_record(s->lag, v / 2);
    hist_record(s->connect, 100 + v % 13);
    hist_record(s->rps, 1000 + v);
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
    const struct hist *pairs[][2] = {{total.latency, whole.latency},
                                     {total.u_latency, whole.u_latency},
                                     {total.lag, whole.lag},
                                     {total.connect, whole.connect},
                                     {total.rps, whole.rps}};
    for (size_t i = 0; i < 5; i++) {
        char *a = hist_encode(pairs[i][0]), *b = hist_encode(pairs[i][1]);
        CHECK_STR(a, b);
        CHECK(hist_mean(pairs[i][0]) == hist_mean(pairs[i][1]));
        free(a);
        free(b);
    }
    stats_free(&whole);
    stats_free(&interval);
    stats_free(&total);
}
