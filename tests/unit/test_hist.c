/* Unit tests for src/hist.c: statistics and percentiles against values computed
 * here from the raw samples, merging, the percentile iterator, and the V2
 * encoding, decoded by an independent decoder (base64, zlib stored blocks,
 * Adler-32, ZigZag LEB128).
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include <math.h>

#include "hist.h"

#define DAY_US 86400000000ULL

/* ---- reference model, written independently of hist.c ------------------- */

/* HdrHistogram slot of v for 3 significant digits: halve until below 2048. */
static size_t ref_index(uint64_t v)
{
    unsigned shift = 0;
    while ((v >> shift) >= 2048)
        shift++;
    return (size_t)shift * 1024 + (size_t)(v >> shift);
}

static unsigned ref_shift(uint64_t v)
{
    unsigned shift = 0;
    while ((v >> shift) >= 2048)
        shift++;
    return shift;
}

static uint64_t ref_lowest(uint64_t v)
{
    unsigned s = ref_shift(v);
    return v >> s << s;
}

static uint64_t ref_highest(uint64_t v)
{
    unsigned s = ref_shift(v);
    return ref_lowest(v) + ((uint64_t)1 << s) - 1;
}

static uint64_t ref_value_of_index(size_t i)
{
    if (i < 2048)
        return i;
    return (uint64_t)(i % 1024 + 1024) << (i / 1024 - 1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A deterministic spread of values from 1 to about 2^36 (no libc rand). */
static uint64_t lcg(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t r = *state >> 20;
    return 1 + (r & ((1ULL << (r % 36 + 1)) - 1));
}

static struct hist *record_all(uint64_t highest, const uint64_t *v, size_t n)
{
    struct hist *h = hist_new(highest);
    for (size_t i = 0; i < n; i++)
        hist_record(h, v[i]);
    return h;
}

static uint64_t *iota(size_t n)
{
    uint64_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = i + 1;
    return v;
}

/* Sample mean and standard deviation by two passes in long double. */
static void ref_stats(const uint64_t *v, size_t n, long double *mean, long double *sd)
{
    long double sum = 0, m2 = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    *mean = sum / n;
    for (size_t i = 0; i < n; i++)
        m2 += (v[i] - *mean) * (v[i] - *mean);
    *sd = n < 2 ? 0 : sqrtl(m2 / (n - 1));
}

/* ---- geometry ------------------------------------------------------------ */

TEST(geometry_matches_hdrhistogram)
{
    struct hist *h = hist_new(DAY_US);
    CHECK(hist_bucket_count(h) == 27); /* wrk2's footer: 27 buckets for 24 h */
    CHECK(hist_sub_bucket_count(h) == 2048);
    hist_free(h);
    uint64_t highest[] = {2, 2047, 2048, 4095, 4096, 3600000000ULL, 10000000, INT64_MAX};
    int buckets[] = {1, 1, 2, 2, 3, 22, 14, 53};
    for (size_t i = 0; i < sizeof highest / sizeof highest[0]; i++) {
        h = hist_new(highest[i]);
        CHECK_I64(hist_bucket_count(h), buckets[i]);
        hist_record(h, highest[i]); /* the top slot exists */
        CHECK_U64(hist_max(h), highest[i]);
        hist_free(h);
    }
}

/* ---- empty, single, reset ------------------------------------------------ */

TEST(empty_histogram)
{
    struct hist *h = hist_new(DAY_US);
    CHECK_U64(hist_count(h), 0);
    CHECK_U64(hist_min(h), UINT64_MAX);
    CHECK_U64(hist_max(h), 0);
    CHECK(hist_mean(h) == 0);
    CHECK(hist_stdev(h) == 0);
    CHECK(isnan(hist_within_stdev(h, 0, 0)));
    CHECK(signbit(hist_within_stdev(h, 0, 0))); /* printf shows "-nan" like wrk */
    CHECK_U64(hist_percentile(h, 50), 0);
    CHECK_U64(hist_percentile(h, 100), 0);
    CHECK_U64(hist_value_at_percentile(h, 99), 0);
    CHECK_U64(hist_distinct(h), 0);
    uint64_t v = 7, c = 7;
    CHECK(!hist_distinct_at(h, 0, &v, &c));
    struct hist_iter it;
    hist_iter_init(&it, h, 5);
    CHECK(!hist_iter_next(&it));
    hist_free(h);
}

TEST(single_sample)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 123456);
    CHECK_U64(hist_count(h), 1);
    CHECK_U64(hist_min(h), 123456);
    CHECK_U64(hist_max(h), 123456);
    CHECK(hist_mean(h) == 123456.0);
    CHECK(hist_stdev(h) == 0);
    CHECK_DBL(hist_within_stdev(h, hist_mean(h), hist_stdev(h)), 100.0, 0);
    CHECK_U64(hist_percentile(h, 0), 123456); /* the bucket's top is capped at max */
    CHECK_U64(hist_percentile(h, 50), 123456);
    CHECK_U64(hist_percentile(h, 100), 123456);
    CHECK_U64(hist_value_at_percentile(h, 50), ref_highest(123456));
    CHECK_U64(hist_value_at_percentile(h, 0), ref_lowest(123456));
    hist_free(h);
}

TEST(reset_empties)
{
    struct hist *h = hist_new(DAY_US);
    for (uint64_t v = 1; v < 5000; v += 7)
        hist_record(h, v);
    CHECK_U64(hist_distinct(h), 715); /* 1, 8, ..., 4999: no two share a slot */
    hist_reset(h);
    CHECK_U64(hist_count(h), 0);
    CHECK_U64(hist_min(h), UINT64_MAX);
    CHECK_U64(hist_max(h), 0);
    CHECK_U64(hist_distinct(h), 0);
    CHECK(hist_mean(h) == 0);
    hist_record(h, 42);
    CHECK_U64(hist_count(h), 1);
    CHECK_U64(hist_min(h), 42);
    CHECK_U64(hist_percentile(h, 50), 42);
    char *enc = hist_encode(h);
    struct hist *fresh = hist_new(DAY_US);
    hist_record(fresh, 42);
    char *enc2 = hist_encode(fresh);
    CHECK_STR(enc, enc2); /* no stale slot survives a reset */
    free(enc);
    free(enc2);
    hist_free(fresh);
    hist_free(h);
}

TEST(slots_match_reference)
{
    /* powers of two, their neighbours, and a random spread */
    enum { N = 3 * 37 + 20000 };
    uint64_t v[N], seed = 5;
    size_t n = 0;
    for (unsigned k = 0; k < 37; k++) {
        v[n++] = (1ULL << k) - 1;
        v[n++] = 1ULL << k;
        v[n++] = (1ULL << k) + 1;
    }
    while (n < N)
        v[n++] = lcg(&seed);
    struct hist *h = record_all(DAY_US, v, N);
    uint64_t low[N];
    for (size_t i = 0; i < N; i++)
        low[i] = ref_lowest(v[i]);
    qsort(low, N, sizeof low[0], cmp_u64);
    size_t rank = 0;
    for (size_t i = 0; i < N;) {
        size_t j = i;
        while (j < N && low[j] == low[i])
            j++;
        uint64_t val, c;
        CHECK(hist_distinct_at(h, rank++, &val, &c));
        CHECK_U64(val, low[i]);
        CHECK_U64(c, j - i);
        i = j;
    }
    CHECK_U64(hist_distinct(h), rank);
    hist_free(h);
}

/* ---- clamping, record_n -------------------------------------------------- */

TEST(values_above_highest_are_clamped)
{
    struct hist *h = hist_new(1000000);
    hist_record(h, 1000001);
    hist_record(h, UINT64_MAX);
    hist_record_n(h, 5000000, 2);
    CHECK_U64(hist_count(h), 4);
    CHECK_U64(hist_min(h), 1000000);
    CHECK_U64(hist_max(h), 1000000);
    CHECK(hist_mean(h) == 1000000.0);
    CHECK(hist_stdev(h) == 0);
    CHECK_U64(hist_percentile(h, 50), 1000000);
    CHECK_U64(hist_distinct(h), 1);
    hist_free(h);
}

TEST(zero_is_a_value)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 0);
    hist_record(h, 0);
    hist_record(h, 2);
    CHECK_U64(hist_min(h), 0);
    CHECK_U64(hist_percentile(h, 50), 0);
    CHECK_U64(hist_percentile(h, 90), 2);
    CHECK_U64(hist_distinct(h), 2);
    hist_free(h);
}

TEST(record_n_equals_repeated_record)
{
    struct hist *a = hist_new(DAY_US), *b = hist_new(DAY_US);
    uint64_t vals[] = {3, 2047, 2048, 2049, 999999, 86399999999ULL};
    for (size_t i = 0; i < 6; i++) {
        hist_record_n(a, vals[i], i + 1);
        for (size_t k = 0; k <= i; k++)
            hist_record(b, vals[i]);
    }
    hist_record_n(a, 1, 0); /* no sample: min must not move to 1 */
    CHECK_U64(hist_count(a), hist_count(b));
    CHECK_U64(hist_min(a), 3);
    CHECK(hist_mean(a) == hist_mean(b));
    CHECK(hist_stdev(a) == hist_stdev(b));
    char *ea = hist_encode(a), *eb = hist_encode(b);
    CHECK_STR(ea, eb);
    free(ea);
    free(eb);
    hist_free(a);
    hist_free(b);
}

/* ---- exact mean and stdev ------------------------------------------------ */

TEST(mean_stdev_exact_1_to_10000)
{
    uint64_t *v = iota(10000);
    struct hist *h = record_all(DAY_US, v, 10000);
    CHECK(hist_mean(h) == 5000.5);
    /* sample variance of 1..n is n (n + 1) / 12 */
    CHECK_DBL(hist_stdev(h), sqrt(10000.0 * 10001.0 / 12.0), 1e-9);
    hist_free(h);
    free(v);
}

TEST(mean_stdev_exact_for_large_close_values)
{
    /* Large values with a small spread: a naive sum_sq - sum^2 / n in double
     * loses every digit here. */
    enum { N = 1000 };
    uint64_t v[N];
    for (size_t i = 0; i < N; i++)
        v[i] = DAY_US - 1 - (i * 7919) % 1000;
    struct hist *h = record_all(DAY_US, v, N);
    long double mean, sd;
    ref_stats(v, N, &mean, &sd);
    CHECK_DBL(hist_mean(h), (double)mean, 2e-5); /* half an ulp at 8.64e10 */
    CHECK_DBL(hist_stdev(h), (double)sd, 1e-9 * (double)sd);
    CHECK_U64(hist_min(h), DAY_US - 1000);
    CHECK_U64(hist_max(h), DAY_US - 1);
    hist_free(h);
}

TEST(mean_stdev_exact_random_spread)
{
    enum { N = 100000 };
    uint64_t *v = malloc(N * sizeof *v), seed = 1;
    for (size_t i = 0; i < N; i++)
        v[i] = lcg(&seed);
    struct hist *h = record_all(DAY_US, v, N);
    long double mean, sd;
    ref_stats(v, N, &mean, &sd);
    CHECK_DBL(hist_mean(h), (double)mean, 1e-12 * (double)mean);
    CHECK_DBL(hist_stdev(h), (double)sd, 1e-12 * (double)sd);
    hist_free(h);
    free(v);
}

TEST(stdev_of_two_samples)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 10);
    hist_record(h, 20);
    CHECK(hist_mean(h) == 15.0);
    CHECK_DBL(hist_stdev(h), sqrt(50.0), 1e-12); /* (25 + 25) / (2 - 1) */
    hist_reset(h);
    hist_record(h, 1); /* a mean that is not an integer: 1.5 */
    hist_record(h, 2);
    CHECK(hist_mean(h) == 1.5);
    CHECK_DBL(hist_stdev(h), sqrt(0.5), 1e-15);
    hist_free(h);
}

/* ---- within stdev -------------------------------------------------------- */

static double ref_within(const uint64_t *v, size_t n, double mean, double sd)
{
    size_t in = 0;
    for (size_t i = 0; i < n; i++)
        in += v[i] >= mean - sd && v[i] <= mean + sd;
    return 100.0 * (double)in / (double)n;
}

TEST(within_stdev_small_set)
{
    uint64_t v[] = {1, 2, 3, 4, 100};
    struct hist *h = record_all(DAY_US, v, 5);
    double m = hist_mean(h), sd = hist_stdev(h);
    CHECK(m == 22.0);
    CHECK_DBL(hist_within_stdev(h, m, sd), 80.0, 1e-12);
    CHECK_DBL(hist_within_stdev(h, m, sd), ref_within(v, 5, m, sd), 1e-12);
    /* the interval is closed at both ends */
    CHECK_DBL(hist_within_stdev(h, 3, 1), 60.0, 1e-12);
    hist_free(h);
}

TEST(within_stdev_one_sample_inside_a_wide_slot)
{
    /* 11681 shares a 4-wide slot from 11680: still within 0 of the mean. */
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 11681);
    CHECK_DBL(hist_within_stdev(h, hist_mean(h), hist_stdev(h)), 100.0, 0);
    hist_free(h);
}

TEST(within_stdev_1_to_10000)
{
    uint64_t *v = iota(10000);
    struct hist *h = record_all(DAY_US, v, 10000);
    double m = hist_mean(h), sd = hist_stdev(h);
    /* values above 2048 sit in 2-wide and wider buckets: allow those at the edge */
    CHECK_DBL(hist_within_stdev(h, m, sd), ref_within(v, 10000, m, sd), 0.1);
    CHECK_DBL(hist_within_stdev(h, 1000, 500), ref_within(v, 10000, 1000, 500), 0);
    hist_free(h);
    free(v);
}

/* ---- percentiles --------------------------------------------------------- */

static const double PCTS[] = {0,    0.001, 0.1, 1,  10,   25,    33.3,   50,
                              66.6, 75,    90,  99, 99.9, 99.99, 99.999, 99.9999};
#define NPCTS (sizeof PCTS / sizeof PCTS[0])

/* wrk's rule on the sorted samples. */
static uint64_t ref_wrk_percentile(const uint64_t *sorted, size_t n, double p)
{
    double r = round(p / 100.0 * (double)n + 0.5);
    size_t rank = r > (double)n ? n : r < 1 ? 1 : (size_t)r;
    return sorted[rank - 1];
}

static void check_wrk_percentiles(const uint64_t *v, size_t n)
{
    uint64_t *s = malloc(n * sizeof *s);
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    struct hist *h = record_all(DAY_US, v, n);
    for (size_t i = 0; i < NPCTS; i++) {
        uint64_t exact = ref_wrk_percentile(s, n, PCTS[i]);
        uint64_t got = hist_percentile(h, PCTS[i]);
        uint64_t want = ref_highest(exact) < s[n - 1] ? ref_highest(exact) : s[n - 1];
        if (got != want)
            UNIT_FAIL("p%g: got %" PRIu64 ", want %" PRIu64 " (exact %" PRIu64 ")", PCTS[i], got,
                      want, exact);
        /* and so within bucket resolution of the exact answer */
        CHECK(got >= exact && got - exact <= exact / 1024);
        if (exact < 2048)
            CHECK_U64(got, exact);
    }
    CHECK_U64(hist_percentile(h, 100), s[n - 1]);
    CHECK_U64(hist_percentile(h, 250), s[n - 1]);
    hist_free(h);
    free(s);
}

TEST(wrk_percentiles_1_to_10000)
{
    uint64_t *v = iota(10000);
    check_wrk_percentiles(v, 10000);
    struct hist *h = record_all(DAY_US, v, 10000);
    CHECK_U64(hist_percentile(h, 50), 5003); /* rank 5001, in the slot 5000..5003 */
    CHECK_U64(hist_percentile(h, 10), 1001); /* rank round(1000.5) = 1001 */
    CHECK_U64(hist_percentile(h, 0), 1);
    hist_free(h);
    free(v);
}

TEST(wrk_percentiles_random_spread)
{
    enum { N = 50000 };
    uint64_t *v = malloc(N * sizeof *v), seed = 42;
    for (size_t i = 0; i < N; i++)
        v[i] = lcg(&seed);
    check_wrk_percentiles(v, N);
    free(v);
}

TEST(wrk_percentile_rank_rounding)
{
    /* 4 samples: p50 -> rank round(2.5) = 3 (half away from zero) */
    uint64_t v[] = {10, 20, 30, 40};
    struct hist *h = record_all(DAY_US, v, 4);
    CHECK_U64(hist_percentile(h, 50), 30);
    CHECK_U64(hist_percentile(h, 99.9), 40); /* rank clamped to count */
    CHECK_U64(hist_percentile(h, -5), 10);
    hist_free(h);
}

/* HdrHistogram's rule on the sorted samples. */
static uint64_t ref_hdr_percentile(const uint64_t *sorted, size_t n, double p)
{
    double req = p < 100 ? p : 100;
    uint64_t rank = (uint64_t)(req * (double)n / 100 + 0.5);
    rank = rank < 1 ? 1 : rank;
    uint64_t exact = sorted[rank - 1];
    return p == 0 ? ref_lowest(exact) : ref_highest(exact);
}

TEST(hdr_value_at_percentile)
{
    enum { N = 30000 };
    uint64_t *v = malloc(N * sizeof *v), seed = 7;
    for (size_t i = 0; i < N; i++)
        v[i] = lcg(&seed);
    struct hist *h = record_all(DAY_US, v, N);
    qsort(v, N, sizeof *v, cmp_u64);
    for (size_t i = 0; i < NPCTS; i++)
        CHECK_U64(hist_value_at_percentile(h, PCTS[i]), ref_hdr_percentile(v, N, PCTS[i]));
    CHECK_U64(hist_value_at_percentile(h, 100), ref_highest(v[N - 1])); /* not capped */
    CHECK_U64(hist_value_at_percentile(h, 150), ref_highest(v[N - 1]));
    hist_free(h);
    free(v);
}

TEST(hdr_value_at_percentile_small)
{
    uint64_t *v = iota(10000);
    struct hist *h = record_all(DAY_US, v, 10000);
    CHECK_U64(hist_value_at_percentile(h, 0), 1);
    CHECK_U64(hist_value_at_percentile(h, 10), 1000); /* rank (int)(1000.5) = 1000 */
    CHECK_U64(hist_value_at_percentile(h, 50), 5003); /* 5000's slot is 5000..5003 */
    CHECK_U64(hist_value_at_percentile(h, 99), 9903); /* 9900's bucket is 9900..9903 */
    hist_free(h);
    free(v);
}

/* ---- merge --------------------------------------------------------------- */

static void check_same(struct hist *a, struct hist *b)
{
    CHECK_U64(hist_count(a), hist_count(b));
    CHECK_U64(hist_min(a), hist_min(b));
    CHECK_U64(hist_max(a), hist_max(b));
    CHECK(hist_mean(a) == hist_mean(b));
    CHECK(hist_stdev(a) == hist_stdev(b));
    for (size_t i = 0; i < NPCTS; i++)
        CHECK_U64(hist_percentile(a, PCTS[i]), hist_percentile(b, PCTS[i]));
    CHECK_U64(hist_distinct(a), hist_distinct(b));
    char *ea = hist_encode(a), *eb = hist_encode(b);
    CHECK_STR(ea, eb);
    free(ea);
    free(eb);
}

TEST(merge_equals_recording_everything)
{
    enum { N = 20000 };
    struct hist *t1 = hist_new(DAY_US), *t2 = hist_new(DAY_US), *all = hist_new(DAY_US);
    uint64_t seed = 99;
    for (size_t i = 0; i < N; i++) {
        uint64_t v = lcg(&seed);
        hist_record(i % 3 ? t1 : t2, v);
        hist_record(all, v);
    }
    hist_merge(t1, t2);
    check_same(t1, all);
    hist_free(t1);
    hist_free(t2);
    hist_free(all);
}

TEST(merge_with_empty)
{
    struct hist *a = hist_new(DAY_US), *empty = hist_new(DAY_US), *b = hist_new(DAY_US);
    hist_record(a, 5);
    hist_record(a, 500000);
    hist_record(b, 5);
    hist_record(b, 500000);
    hist_merge(a, empty);
    check_same(a, b);
    hist_merge(empty, b);
    check_same(empty, b);
    hist_free(a);
    hist_free(b);
    hist_free(empty);
}

TEST(merge_smaller_into_larger)
{
    struct hist *big = hist_new(DAY_US), *small = hist_new(10000000), *want = hist_new(DAY_US);
    hist_record(small, 9999999);
    hist_record(small, 12);
    hist_record(big, 77);
    hist_record(want, 9999999);
    hist_record(want, 12);
    hist_record(want, 77);
    hist_merge(big, small);
    check_same(big, want);
    hist_free(big);
    hist_free(small);
    hist_free(want);
}

/* ---- distinct values ----------------------------------------------------- */

TEST(distinct_values_in_order)
{
    struct hist *h = hist_new(DAY_US);
    uint64_t vals[] = {100000, 5, 3001, 7, 5, 3000}; /* 3000 and 3001 share a bucket */
    for (size_t i = 0; i < 6; i++)
        hist_record(h, vals[i]);
    uint64_t want_v[] = {5, 7, 3000, ref_lowest(100000)}, want_c[] = {2, 1, 2, 1};
    CHECK_U64(hist_distinct(h), 4);
    uint64_t v, c;
    for (size_t i = 0; i < 4; i++) {
        CHECK(hist_distinct_at(h, i, &v, &c));
        CHECK_U64(v, want_v[i]);
        CHECK_U64(c, want_c[i]);
    }
    CHECK(!hist_distinct_at(h, 4, &v, &c));
    /* backwards and random access restart the cursor */
    size_t order[] = {3, 0, 2, 2, 1, 3};
    for (size_t k = 0; k < 6; k++) {
        CHECK(hist_distinct_at(h, order[k], &v, &c));
        CHECK_U64(v, want_v[order[k]]);
        CHECK_U64(c, want_c[order[k]]);
    }
    hist_free(h);
}

TEST(distinct_cache_follows_changes)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 10);
    hist_record(h, 30);
    uint64_t v, c;
    CHECK_U64(hist_distinct(h), 2);
    CHECK(hist_distinct_at(h, 1, &v, &c) && v == 30);
    hist_record(h, 20); /* lands between: ranks shift */
    CHECK_U64(hist_distinct(h), 3);
    CHECK(hist_distinct_at(h, 1, &v, &c) && v == 20);
    CHECK(hist_distinct_at(h, 2, &v, &c) && v == 30);
    /* same count after a reset, different data */
    hist_reset(h);
    hist_record(h, 1);
    hist_record(h, 2);
    hist_record(h, 2);
    CHECK_U64(hist_distinct(h), 2);
    CHECK(hist_distinct_at(h, 1, &v, &c) && v == 2 && c == 2);
    CHECK(!hist_distinct_at(h, 2, &v, &c));
    hist_record(h, 3);
    struct hist *other = hist_new(DAY_US);
    hist_record(other, 4);
    hist_merge(h, other);
    CHECK_U64(hist_distinct(h), 4);
    CHECK(hist_distinct_at(h, 3, &v, &c) && v == 4 && c == 1);
    hist_free(other);
    hist_free(h);
}

TEST(distinct_matches_sorted_samples)
{
    uint64_t *v = iota(3000);
    struct hist *h = record_all(DAY_US, v, 3000);
    /* 1..2047 one each, then 2048..3000 in pairs: 477 buckets */
    CHECK_U64(hist_distinct(h), 2047 + 477);
    uint64_t total = 0, prev = 0, val, c;
    for (size_t i = 0; hist_distinct_at(h, i, &val, &c); i++) {
        CHECK(i == 0 || val > prev);
        CHECK_U64(val, ref_lowest(val));
        if (val < 2048)
            CHECK_U64(val, i + 1);
        prev = val;
        total += c;
    }
    CHECK_U64(total, 3000);
    hist_free(h);
    free(v);
}

/* ---- percentile iterator ------------------------------------------------- */

TEST(iterator_levels_1_to_10000)
{
    uint64_t *v = iota(10000);
    struct hist *h = record_all(DAY_US, v, 10000);
    struct hist_iter it;
    hist_iter_init(&it, h, 5);
    /* wrk2's spectrum: 10% steps to 50%, 5% to 75%, 2.5% to 87.5%, ... */
    double want[] = {0,  10, 20,   30, 40,   50, 55,   60,    65,
                     70, 75, 77.5, 80, 82.5, 85, 87.5, 88.75, 90};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK(hist_iter_next(&it));
        CHECK_DBL(it.percentile, want[i], 1e-9);
        if (it.value < 2048) {
            /* exact slots: the row is the first value reaching the level */
            uint64_t need = (uint64_t)ceil(want[i] * 100);
            CHECK_U64(it.cumulative, need ? need : 1);
            CHECK_U64(it.value, it.cumulative);
        }
    }
    hist_free(h);
    free(v);
}

TEST(iterator_rows_are_monotonic_and_end_at_100)
{
    enum { N = 40000 };
    uint64_t *v = malloc(N * sizeof *v), seed = 3;
    for (size_t i = 0; i < N; i++)
        v[i] = lcg(&seed);
    struct hist *h = record_all(DAY_US, v, N);
    qsort(v, N, sizeof *v, cmp_u64);
    struct hist_iter it;
    hist_iter_init(&it, h, 5);
    size_t rows = 0;
    double last_p = -1;
    uint64_t last_v = 0, last_c = 0;
    while (hist_iter_next(&it)) {
        if (rows == 0) {
            CHECK(it.percentile == 0);
            CHECK_U64(it.value, ref_highest(v[0]));
        }
        CHECK(it.percentile > last_p);
        CHECK(it.value >= last_v);
        CHECK(it.cumulative >= last_c);
        /* the row's value is that of the sample at its cumulative count */
        CHECK_U64(it.value, ref_highest(v[it.cumulative - 1]));
        CHECK(100.0 * (double)it.cumulative / N >= it.percentile);
        last_p = it.percentile, last_v = it.value, last_c = it.cumulative;
        rows++;
    }
    CHECK(last_p == 100.0);
    CHECK_U64(last_c, N);
    CHECK_U64(last_v, ref_highest(v[N - 1]));
    CHECK(rows > 50 && rows < 200);
    CHECK(!hist_iter_next(&it)); /* stays finished */
    hist_free(h);
    free(v);
}

TEST(iterator_single_sample)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 4160);
    struct hist_iter it;
    hist_iter_init(&it, h, 5);
    CHECK(hist_iter_next(&it));
    CHECK(it.percentile == 0);
    CHECK_U64(it.value, 4163); /* wrk2's sample spectrum: max 4.160 ms, row 4.163 */
    CHECK_U64(it.cumulative, 1);
    CHECK(hist_iter_next(&it));
    CHECK(it.percentile == 100);
    CHECK_U64(it.value, 4163);
    CHECK_U64(it.cumulative, 1);
    CHECK(!hist_iter_next(&it));
    CHECK(!hist_iter_next(&it));
    hist_free(h);
}

TEST(iterator_repeats_a_heavy_bucket)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 1);
    hist_record_n(h, 2, 98);
    hist_record(h, 3);
    struct hist_iter it;
    hist_iter_init(&it, h, 5);
    CHECK(hist_iter_next(&it) && it.value == 1 && it.cumulative == 1);
    /* every level from 10% to 99% is reached inside value 2's slot */
    const double first_levels[] = {10, 20, 30, 40, 50, 55};
    double last = 0;
    size_t rows = 0;
    while (hist_iter_next(&it) && it.value == 2) {
        CHECK_U64(it.cumulative, 99);
        CHECK(it.percentile > last && it.percentile <= 99);
        if (rows < 6)
            CHECK_DBL(it.percentile, first_levels[rows], 1e-12);
        last = it.percentile;
        rows++;
    }
    CHECK(rows > 20);
    /* the last slot gives one row at its level, then the 100% row */
    CHECK_U64(it.value, 3);
    CHECK_U64(it.cumulative, 100);
    CHECK(it.percentile < 100);
    CHECK(hist_iter_next(&it) && it.value == 3 && it.percentile == 100);
    CHECK(!hist_iter_next(&it));
    hist_free(h);
}

TEST(iterator_zero_value_first)
{
    struct hist *h = hist_new(DAY_US);
    hist_record_n(h, 0, 3);
    struct hist_iter it;
    hist_iter_init(&it, h, 1);
    CHECK(hist_iter_next(&it) && it.value == 0 && it.percentile == 0 && it.cumulative == 3);
    CHECK(hist_iter_next(&it) && it.value == 0 && it.percentile == 100);
    CHECK(!hist_iter_next(&it));
    hist_free(h);
}

/* ---- V2 encoding, decoded here ------------------------------------------- */

struct decoded {
    uint32_t cookie, payload_len, nio, sigfigs;
    uint64_t lowest, highest, ratio_bits;
    uint64_t *counts; /* by slot */
    size_t ncounts;
    int blocks;
};

static int b64_digit(char c)
{
    const char *digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = strchr(digits, c);
    return c && p ? (int)(p - digits) : -1;
}

static uint8_t *b64_decode(const char *s, size_t *n)
{
    size_t len = strlen(s);
    if (len % 4)
        return NULL;
    uint8_t *out = malloc(len / 4 * 3 + 1);
    *n = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t w = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            int d = s[i + k] == '=' ? (pad++, 0) : b64_digit(s[i + k]);
            if (d < 0 || (pad && s[i + k] != '=') || (pad && i + 4 < len)) {
                free(out);
                return NULL;
            }
            w = w << 6 | (uint32_t)d;
        }
        for (int k = 0; k < 3 - pad; k++)
            out[(*n)++] = (uint8_t)(w >> (16 - 8 * k));
    }
    return out;
}

static uint64_t be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

/* Inflates a zlib stream made only of stored blocks; NULL if it is anything else. */
static uint8_t *inflate_stored(const uint8_t *z, size_t zn, size_t *n, int *blocks)
{
    if (zn < 6 || z[0] != 0x78 || (z[0] * 256 + z[1]) % 31 || (z[1] & 0x20))
        return NULL;
    uint8_t *out = malloc(zn);
    size_t at = 2;
    bool final = false;
    *n = 0;
    *blocks = 0;
    while (!final) {
        if (at + 5 > zn || (z[at] & 0x06) != 0) /* BTYPE must be 00 */
            goto bad;
        final = z[at] & 1;
        size_t len = z[at + 1] | (size_t)z[at + 2] << 8;
        size_t nlen = z[at + 3] | (size_t)z[at + 4] << 8;
        if ((len ^ 0xffff) != nlen || at + 5 + len > zn)
            goto bad;
        memcpy(out + *n, z + at + 5, len);
        *n += len;
        at += 5 + len;
        ++*blocks;
    }
    if (at + 4 != zn)
        goto bad;
    uint64_t a = 1, b = 0;
    for (size_t i = 0; i < *n; i++) {
        a = (a + out[i]) % 65521;
        b = (b + a) % 65521;
    }
    if (be(z + at, 4) != (b << 16 | a))
        goto bad;
    return out;
bad:
    free(out);
    return NULL;
}

static bool read_zigzag(const uint8_t **p, const uint8_t *end, int64_t *v)
{
    uint64_t z = 0;
    for (int i = 0; i < 9; i++) {
        if (*p >= end)
            return false;
        uint8_t byte = *(*p)++;
        if (i == 8) {
            z |= (uint64_t)byte << 56;
            break;
        }
        z |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80))
            break;
    }
    *v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return true;
}

static bool decode(const char *b64, struct decoded *d)
{
    size_t n, pn;
    uint8_t *raw = b64_decode(b64, &n), *pl = NULL;
    bool ok = raw && n >= 8 && be(raw, 4) == 0x1c849314 && be(raw + 4, 4) == n - 8 &&
              (pl = inflate_stored(raw + 8, n - 8, &pn, &d->blocks)) && pn >= 40;
    if (ok) {
        d->cookie = (uint32_t)be(pl, 4);
        d->payload_len = (uint32_t)be(pl + 4, 4);
        d->nio = (uint32_t)be(pl + 8, 4);
        d->sigfigs = (uint32_t)be(pl + 12, 4);
        d->lowest = be(pl + 16, 8);
        d->highest = be(pl + 24, 8);
        d->ratio_bits = be(pl + 32, 8);
        ok = d->payload_len == pn - 40;
    }
    d->counts = calloc(ref_index(INT64_MAX) + 1, sizeof *d->counts);
    d->ncounts = 0;
    const uint8_t *p = pl ? pl + 40 : NULL, *end = pl ? pl + pn : NULL;
    int64_t v;
    while (ok && p < end && (ok = read_zigzag(&p, end, &v))) {
        if (v < 0)
            d->ncounts += (size_t)-v;
        else
            d->counts[d->ncounts++] = (uint64_t)v;
    }
    free(raw);
    free(pl);
    return ok;
}

/* Decodes h's encoding and checks the header and every slot's count. */
static void check_round_trip(struct hist *h, uint64_t highest, int min_blocks)
{
    char *enc = hist_encode(h);
    /* the compressed cookie, then a length that fills the next two bytes from 64 KiB */
    const char *prefix = strlen(enc) < 87000 ? "HISTFAAA" : "HISTFA";
    CHECK(strncmp(enc, prefix, strlen(prefix)) == 0);
    struct decoded d;
    bool ok = decode(enc, &d);
    CHECK(ok);
    if (ok) {
        CHECK_U64(d.cookie, 0x1c849313);
        CHECK_U64(d.nio, 0);
        CHECK_U64(d.sigfigs, 3);
        CHECK_U64(d.lowest, 1);
        CHECK_U64(d.highest, highest);
        CHECK_U64(d.ratio_bits, 0x3ff0000000000000ULL); /* 1.0 */
        CHECK(d.blocks >= min_blocks);
        /* encoded up to max's slot, then the same non-empty slots in order */
        CHECK_U64(d.ncounts, hist_count(h) ? ref_index(hist_max(h)) + 1 : 0);
        uint64_t total = 0, val, c;
        size_t rank = 0;
        for (size_t i = 0; i < d.ncounts; i++) {
            if (!d.counts[i])
                continue;
            CHECK(hist_distinct_at(h, rank++, &val, &c));
            CHECK_U64(val, ref_value_of_index(i));
            CHECK_U64(c, d.counts[i]);
            total += d.counts[i];
        }
        CHECK_U64(rank, hist_distinct(h));
        CHECK_U64(total, hist_count(h));
    }
    free(d.counts);
    free(enc);
}

TEST(encode_empty)
{
    struct hist *h = hist_new(DAY_US);
    check_round_trip(h, DAY_US, 1);
    hist_free(h);
}

TEST(encode_small)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 1);
    hist_record(h, 1);
    hist_record(h, 3);
    hist_record(h, 5000);
    check_round_trip(h, DAY_US, 1);
    char *enc = hist_encode(h);
    CHECK(strlen(enc) % 4 == 0);
    free(enc);
    hist_free(h);
}

TEST(encode_1_to_10000)
{
    uint64_t *v = iota(10000);
    struct hist *h = record_all(10000000, v, 10000);
    check_round_trip(h, 10000000, 1);
    hist_free(h);
    free(v);
}

TEST(encode_random_spread)
{
    enum { N = 100000 };
    struct hist *h = hist_new(DAY_US);
    uint64_t seed = 11;
    for (size_t i = 0; i < N; i++)
        hist_record(h, lcg(&seed));
    hist_record(h, DAY_US * 2); /* clamped into the top slot */
    check_round_trip(h, DAY_US, 1);
    hist_free(h);
}

TEST(encode_nine_byte_counts)
{
    /* a count >= 2^55 zigzags to >= 2^56: the 9-byte LEB128 form */
    struct hist *h = hist_new(DAY_US);
    hist_record_n(h, 77, (1ULL << 62) + 12345);
    hist_record_n(h, 3000000, (1ULL << 56) - 1);
    check_round_trip(h, DAY_US, 1);
    hist_free(h);
}

TEST(encode_several_stored_blocks)
{
    /* every slot up to 24 h busy with 5-byte counts: about 140 KB of payload */
    struct hist *h = hist_new(DAY_US);
    for (size_t i = 0; i < 28672; i++)
        hist_record_n(h, ref_value_of_index(i), (1ULL << 30) + i);
    check_round_trip(h, DAY_US, 3);
    hist_free(h);
}

/* ---- decoding ------------------------------------------------------------ */

/* Decode of encode: the same buckets, so encoding again gives the same text;
 * with the exact summary restored, the same statistics. */
static void check_decode(struct hist *h)
{
    const char *why = NULL;
    char *enc = hist_encode(h);
    struct hist *back = hist_decode(enc, &why);
    CHECK(back != NULL);
    if (!back) {
        UNIT_FAIL("%s", why);
        free(enc);
        return;
    }
    char *again = hist_encode(back);
    CHECK_STR(again, enc);
    CHECK_U64(hist_highest(back), hist_highest(h));
    if (hist_count(h)) {
        CHECK(hist_set_summary(back, hist_min(h), hist_max(h), hist_mean(h), hist_stdev(h)));
        CHECK_U64(hist_min(back), hist_min(h));
        CHECK_U64(hist_max(back), hist_max(h));
        CHECK_DBL(hist_mean(back), hist_mean(h), 1e-9 * hist_mean(h));
        CHECK_DBL(hist_stdev(back), hist_stdev(h), 1e-9 * hist_stdev(h) + 1e-9);
        for (size_t i = 0; i < NPCTS; i++)
            CHECK_U64(hist_percentile(back, PCTS[i]), hist_percentile(h, PCTS[i]));
    }
    hist_free(back);
    free(again);
    free(enc);
}

TEST(decode_reads_back_what_encode_wrote)
{
    struct hist *h = hist_new(DAY_US);
    check_decode(h); /* empty */
    hist_record(h, 0);
    check_decode(h);
    uint64_t seed = 7;
    for (size_t i = 0; i < 50000; i++)
        hist_record(h, lcg(&seed));
    hist_record_n(h, 3, 1ULL << 40); /* counts past 7 bytes of LEB128 */
    check_decode(h);
    hist_free(h);
    /* another highest: its own geometry */
    h = hist_new(10000000);
    for (uint64_t v = 1; v < 100000; v += 7)
        hist_record(h, v);
    check_decode(h);
    hist_free(h);
}

TEST(decode_of_a_large_histogram_spans_several_stored_blocks)
{
    /* every slot of 24 h in use: the payload passes 64 KiB */
    struct hist *h = hist_new(DAY_US);
    for (uint64_t v = 1; v < DAY_US; v += v / 1000 + 1)
        hist_record_n(h, v, 10000); /* three bytes a slot */
    char *enc = hist_encode(h);
    CHECK(strlen(enc) > 4 * 65535 / 3);
    free(enc);
    check_decode(h);
    hist_free(h);
}

static const char *decode_error(const char *text)
{
    const char *why = NULL;
    struct hist *h = hist_decode(text, &why);
    if (h) {
        UNIT_FAIL("decoded %s", text);
        hist_free(h);
        return "";
    }
    return why;
}

/* enc with the byte at offset (of the decoded wire form) replaced; with
 * fix, the checksum of the (single stored block's) payload made right again. */
static char *patched(const char *enc, long offset, uint8_t byte, bool fix)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(enc), len = 0;
    uint8_t *raw = malloc(n);
    for (size_t i = 0; i < n; i += 4) {
        uint32_t w = 0;
        for (size_t k = 0; k < 4; k++)
            w = w << 6 | (uint32_t)(enc[i + k] == '=' ? 0 : strchr(digits, enc[i + k]) - digits);
        raw[len++] = (uint8_t)(w >> 16), raw[len++] = (uint8_t)(w >> 8), raw[len++] = (uint8_t)w;
    }
    len -= (enc[n - 1] == '=') + (enc[n - 2] == '=');
    raw[offset < 0 ? (long)len + offset : offset] = byte; /* from the end when negative */
    if (fix) {
        uint32_t a = 1, b = 0;
        for (size_t i = 15; i < len - 4; i++)
            a = (a + raw[i]) % 65521, b = (b + a) % 65521;
        uint32_t check = b << 16 | a;
        for (int k = 0; k < 4; k++)
            raw[len - 4 + k] = (uint8_t)(check >> (24 - 8 * k));
    }
    char *out = malloc(n + 1), *p = out;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t w = (uint32_t)raw[i] << 16 | (i + 1 < len ? raw[i + 1] << 8 : 0) |
                     (i + 2 < len ? raw[i + 2] : 0);
        *p++ = digits[w >> 18], *p++ = digits[w >> 12 & 63];
        *p++ = i + 1 < len ? digits[w >> 6 & 63] : '=';
        *p++ = i + 2 < len ? digits[w & 63] : '=';
    }
    *p = '\0';
    free(raw);
    return out;
}

TEST(decode_refuses_what_is_not_volleys_histogram)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 5);
    hist_record(h, 5000);
    char *enc = hist_encode(h);
    CHECK_STR(decode_error(""), "not base64");
    CHECK_STR(decode_error("HISTFAA"), "not base64");
    CHECK_STR(decode_error("HIST*AAA"), "not base64");
    CHECK_STR(decode_error("AAAAAAAA"), "not an HdrHistogram V2 compressed histogram");
    /* wire: 8-byte header, zlib header at 8, block header at 10, payload at 15 */
    char *bad = patched(enc, 10, 0x05, false); /* BTYPE 10: dynamic Huffman codes */
    CHECK_STR(decode_error(bad),
              "compressed with deflate (volley reads the stored blocks it writes)");
    free(bad);
    bad = patched(enc, 9, 0x02, false); /* FCHECK wrong */
    CHECK_STR(decode_error(bad), "a broken zlib stream");
    free(bad);
    bad = patched(enc, 15 + 40, 0x7f, false); /* a count changed: the Adler-32 no longer matches */
    CHECK_STR(decode_error(bad), "a broken zlib stream");
    free(bad);
    bad = patched(enc, 15 + 15, 2, true); /* 2 significant digits */
    CHECK_STR(decode_error(bad),
              "histogram settings other than volley's (lowest 1, 3 significant digits)");
    free(bad);
    bad = patched(enc, 15 + 0, 0x1d, true); /* the payload's cookie */
    CHECK_STR(decode_error(bad), "not an HdrHistogram V2 payload");
    free(bad);
    bad = patched(enc, -5, 0x82, true); /* the last count's LEB128 goes on past the end */
    CHECK_STR(decode_error(bad), "broken counts");
    free(bad);
    hist_free(h);
    free(enc);
}

TEST(set_summary_refuses_figures_that_do_not_fit_the_buckets)
{
    struct hist *h = hist_new(DAY_US);
    hist_record(h, 100);
    hist_record(h, 300000);
    char *enc = hist_encode(h);
    const char *why;
    struct hist *back = hist_decode(enc, &why);
    CHECK(!hist_set_summary(back, 99, 300000, 150050, 212061));  /* min in another slot */
    CHECK(!hist_set_summary(back, 100, 400000, 150050, 212061)); /* max in another slot */
    CHECK(!hist_set_summary(back, 100, 300000, 50, 212061));     /* mean below min */
    CHECK(!hist_set_summary(back, 100, 300000, 150050, -1));     /* negative stdev */
    CHECK(!hist_set_summary(back, 100, 300000, 150050, 1e9));    /* stdev past the range */
    CHECK(hist_set_summary(back, 100, 300000, hist_mean(h), hist_stdev(h)));
    CHECK_U64(hist_max(back), 300000);
    CHECK(hist_mean(back) == hist_mean(h));
    struct hist *empty = hist_new(DAY_US);
    CHECK(!hist_set_summary(empty, 0, 0, 0, 0));
    hist_free(empty);
    hist_free(back);
    hist_free(h);
    free(enc);
}

/* Prometheus' cumulative buckets: the samples at most each bound, counting
 * the whole slot that holds the bound as HdrHistogram does, and the exact
 * sum. */
TEST(count_at_most_gives_cumulative_buckets)
{
    struct hist *h = hist_new(DAY_US);
    uint64_t values[] = {5, 999, 1000, 1001, 2500, 2501, 100000, DAY_US + 7};
    uint64_t bounds[] = {1, 1000, 2500, 99999, 100000, DAY_US * 2};
    uint64_t counts[6];
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        hist_record(h, values[i]);
    hist_count_at_most(h, bounds, 6, counts);
    CHECK_U64(counts[0], 0);
    CHECK_U64(counts[1], 3);
    /* 2500 and 2501 share a slot above 2048 (two values wide) */
    CHECK_U64(counts[2], 6);
    /* 99999's slot, 64 values wide, holds 100000 too */
    CHECK_U64(counts[3], 7);
    CHECK_U64(counts[4], 7);
    CHECK_U64(counts[5], 8); /* past the highest: every sample, clamped or not */
    CHECK_DBL(hist_sum(h), 5 + 999 + 1000 + 1001 + 2500 + 2501 + 100000 + (double)DAY_US, 0.5);
    hist_reset(h);
    hist_count_at_most(h, bounds, 6, counts);
    CHECK_U64(counts[5], 0);
    CHECK_DBL(hist_sum(h), 0, 0);
    hist_free(h);
}
