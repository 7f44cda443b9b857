/* The per-thread histogram: HdrHistogram's bucket layout (lowest 1, 3 significant
 * digits) plus exact running sums, wrk's and HdrHistogram's percentile rules, the
 * percentile iterator behind wrk2's spectrum, and HdrHistogram's V2 wire encoding.
 * SPDX-License-Identifier: MIT */
#include "hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "xalloc.h"

typedef unsigned __int128 u128;

/* 3 significant digits need 2 * 10^3 distinct steps per power of two, rounded up
 * to a power of two: 2048 sub-buckets, of which every bucket after the first
 * uses only the upper half (the lower half is covered by the previous bucket at
 * twice the resolution). So index = bucket * 1024 + (value >> bucket), and every
 * value below 2048 has its own slot. */
#define SUB_BUCKET_BITS 11
#define SUB_BUCKET_COUNT (1u << SUB_BUCKET_BITS)
#define SUB_BUCKET_HALF_BITS (SUB_BUCKET_BITS - 1)
#define SUB_BUCKET_HALF (1u << SUB_BUCKET_HALF_BITS)

struct hist {
    uint64_t highest;
    uint64_t count;
    uint64_t min, max;
    u128 sum, sum_sq; /* exact while sum_sq < 2^128 */
    int bucket_count;
    size_t counts_len;
    /* hist_distinct's cache, mutable even through a const pointer: valid while
     * cache_ok and count == cache_count (every change of the data changes count;
     * hist_reset clears cache_ok). */
    bool cache_ok;
    uint64_t cache_count;
    size_t ndistinct;
    size_t cursor_rank, cursor_index; /* cursor_index holds distinct value #rank */
    uint64_t counts[];
};

/* ---- geometry ------------------------------------------------------------ */

/* HdrHistogram's bucket index is the number of doublings above 2048 the value
 * needs; OR-ing in the sub-bucket mask makes every value below 2048 bucket 0. */
static inline size_t index_of(uint64_t v)
{
    unsigned bucket = 64 - SUB_BUCKET_BITS - (unsigned)__builtin_clzll(v | (SUB_BUCKET_COUNT - 1));
    return ((size_t)bucket << SUB_BUCKET_HALF_BITS) + (size_t)(v >> bucket);
}

/* The inverse of index_of: indexes below 2048 are bucket 0 at unit resolution. */
static unsigned bucket_at(size_t i)
{
    return i < SUB_BUCKET_COUNT ? 0 : (unsigned)(i >> SUB_BUCKET_HALF_BITS) - 1;
}

static uint64_t lowest_at(size_t i)
{
    if (i < SUB_BUCKET_COUNT)
        return i;
    return (uint64_t)((i & (SUB_BUCKET_HALF - 1)) + SUB_BUCKET_HALF) << bucket_at(i);
}

static uint64_t highest_at(size_t i) { return lowest_at(i) + (((uint64_t)1 << bucket_at(i)) - 1); }

/* HdrHistogram's bucket count: doublings of 2048 until the value is covered, one
 * more when the next doubling would overflow int64 (buckets_needed_to_cover_value). */
static int buckets_for(uint64_t highest)
{
    uint64_t untrackable = SUB_BUCKET_COUNT;
    int n = 1;
    while (untrackable <= highest) {
        if (untrackable > (uint64_t)INT64_MAX / 2)
            return n + 1;
        untrackable <<= 1;
        n++;
    }
    return n;
}

/* ---- recording ----------------------------------------------------------- */

struct hist *hist_new(uint64_t highest)
{
    if (highest < 2 || highest > (uint64_t)INT64_MAX)
        die("hist_new: highest trackable value %llu out of range", (unsigned long long)highest);
    int buckets = buckets_for(highest);
    size_t len = (size_t)(buckets + 1) * SUB_BUCKET_HALF;
    struct hist *h = xcalloc(1, sizeof *h + len * sizeof h->counts[0]);
    h->highest = highest;
    h->bucket_count = buckets;
    h->counts_len = len;
    h->min = UINT64_MAX;
    return h;
}

void hist_free(struct hist *h) { free(h); }

/* Only the slots from min's to max's can hold counts: clearing just those
 * keeps a reset cheap, and leaves untouched pages unmapped. */
void hist_reset(struct hist *h)
{
    if (h->count) {
        size_t first = index_of(h->min);
        memset(&h->counts[first], 0, (index_of(h->max) - first + 1) * sizeof h->counts[0]);
    }
    h->count = 0;
    h->min = UINT64_MAX;
    h->max = 0;
    h->sum = h->sum_sq = 0;
    h->cache_ok = false;
}

/* The hot path: one slot increment and the running sums; no allocation, and the
 * clamp and min/max updates compile to conditional moves. */
void hist_record(struct hist *h, uint64_t value)
{
    uint64_t v = value > h->highest ? h->highest : value;
    h->counts[index_of(v)]++;
    h->count++;
    h->sum += v;
    h->sum_sq += (u128)v * v;
    h->min = v < h->min ? v : h->min;
    h->max = v > h->max ? v : h->max;
}

void hist_record_n(struct hist *h, uint64_t value, uint64_t n)
{
    if (n == 0) /* no sample: min and max must not move */
        return;
    uint64_t v = value > h->highest ? h->highest : value;
    h->counts[index_of(v)] += n;
    h->count += n;
    h->sum += (u128)v * n;
    h->sum_sq += (u128)v * v * n;
    h->min = v < h->min ? v : h->min;
    h->max = v > h->max ? v : h->max;
}

/* Slots mean the same values whatever the highest, so adding slot by slot is
 * exact; src only has to fit. */
void hist_merge(struct hist *dst, const struct hist *src)
{
    if (src->counts_len > dst->counts_len)
        die("hist_merge: source histogram is larger than the destination");
    if (src->count == 0)
        return;
    for (size_t i = index_of(src->min); i <= index_of(src->max); i++)
        dst->counts[i] += src->counts[i];
    dst->count += src->count;
    dst->sum += src->sum;
    dst->sum_sq += src->sum_sq;
    dst->min = src->min < dst->min ? src->min : dst->min;
    dst->max = src->max > dst->max ? src->max : dst->max;
}

/* ---- summary statistics -------------------------------------------------- */

uint64_t hist_count(const struct hist *h) { return h->count; }
uint64_t hist_min(const struct hist *h) { return h->min; }
uint64_t hist_max(const struct hist *h) { return h->max; }
int hist_bucket_count(const struct hist *h) { return h->bucket_count; }
int hist_sub_bucket_count(const struct hist *h)
{
    (void)h;
    return SUB_BUCKET_COUNT;
}

double hist_mean(const struct hist *h)
{
    if (h->count == 0)
        return 0;
    /* sum = q * n + r: the integer part is exact, only r / n is rounded */
    u128 q = h->sum / h->count, r = h->sum % h->count;
    return (double)((long double)q + (long double)r / h->count);
}

double hist_sum(const struct hist *h) { return (double)(long double)h->sum; }

void hist_count_at_most(const struct hist *h, const uint64_t *bounds, size_t n, uint64_t *counts)
{
    uint64_t below = 0;
    size_t i = 0, k = 0;
    if (h->count)
        i = index_of(h->min);
    for (; k < n; k++) {
        /* slots up to the bound's, clamped as recording clamps */
        uint64_t bound = bounds[k] > h->highest ? h->highest : bounds[k];
        size_t last = h->count ? index_of(bound) : 0;
        if (h->count && h->max <= bound)
            below = h->count;
        else
            for (; h->count && i <= last; i++)
                below += h->counts[i];
        counts[k] = below;
    }
}

/* The sum of squared deviations, sum_sq - sum^2 / n, is computed in integers as
 * far as possible so that no cancellation happens: with sum = q n + r,
 * sum^2 / n = q^2 n + 2 q r + r^2 / n, and every term is at most sum_sq. */
double hist_stdev(const struct hist *h)
{
    uint64_t n = h->count;
    if (n < 2)
        return 0;
    u128 q = h->sum / n, r = h->sum % n;
    u128 rr = r * r; /* r < n < 2^64 */
    u128 whole = h->sum_sq - q * q * n - 2 * q * r - rr / n;
    long double m2 = (long double)whole - (long double)(rr % n) / n;
    if (m2 < 0)
        m2 = 0;
    return (double)sqrtl(m2 / (n - 1));
}

double hist_within_stdev(const struct hist *h, double mean, double stdev)
{
    if (h->count == 0)
        return -NAN;
    double lower = mean - stdev, upper = mean + stdev;
    uint64_t within = 0;
    for (size_t i = index_of(h->min); i <= index_of(h->max); i++) {
        /* A slot stands for its lowest value, but no sample is below the
         * minimum: a single sample is within 0 of itself wherever it falls
         * in its slot (the Req/Sec row of a run with one sample). */
        uint64_t lowest = lowest_at(i);
        double v = (double)(lowest < h->min ? h->min : lowest);
        if (h->counts[i] && v >= lower && v <= upper)
            within += h->counts[i];
    }
    return 100.0 * (double)within / (double)h->count;
}

/* ---- percentiles --------------------------------------------------------- */

/* The first slot whose cumulative count reaches rank (1 <= rank <= count). */
static size_t index_at_rank(const struct hist *h, uint64_t rank)
{
    uint64_t seen = 0;
    size_t last = index_of(h->max);
    for (size_t i = index_of(h->min); i < last; i++) {
        seen += h->counts[i];
        if (seen >= rank)
            return i;
    }
    return last;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
    if (h->count == 0)
        return 0;
    if (p >= 100)
        return h->max;
    double r = round(p / 100.0 * (double)h->count + 0.5);
    uint64_t rank = r >= (double)h->count ? h->count : r >= 1 ? (uint64_t)r : 1;
    uint64_t v = highest_at(index_at_rank(h, rank));
    return v < h->max ? v : h->max;
}

/* Same float operations, in the same order, as hdrh's get_value_at_percentile
 * (HdrHistogram_c divides p by 100 first, which can round differently). */
uint64_t hist_value_at_percentile(const struct hist *h, double p)
{
    if (h->count == 0)
        return 0;
    double req = p < 100.0 ? p : 100.0;
    double c = req * (double)h->count / 100 + 0.5;
    uint64_t rank = c >= (double)h->count ? h->count : c >= 1 ? (uint64_t)c : 1;
    size_t i = index_at_rank(h, rank);
    return p == 0 ? lowest_at(i) : highest_at(i);
}

/* ---- distinct values ----------------------------------------------------- */

static size_t next_nonempty(const struct hist *h, size_t i)
{
    while (h->counts[i] == 0)
        i++;
    return i;
}

/* Brings the cache up to date; the cursor restarts at the first distinct value. */
static struct hist *fresh_cache(const struct hist *ch)
{
    struct hist *h = (struct hist *)ch; /* only cache fields are written */
    if (h->cache_ok && h->cache_count == h->count)
        return h;
    h->ndistinct = 0;
    if (h->count) {
        for (size_t i = index_of(h->min); i <= index_of(h->max); i++)
            h->ndistinct += h->counts[i] != 0;
        h->cursor_index = index_of(h->min);
    }
    h->cursor_rank = 0;
    h->cache_count = h->count;
    h->cache_ok = true;
    return h;
}

size_t hist_distinct(const struct hist *h) { return fresh_cache(h)->ndistinct; }

bool hist_distinct_at(const struct hist *ch, size_t i, uint64_t *value, uint64_t *count)
{
    struct hist *h = fresh_cache(ch);
    if (i >= h->ndistinct)
        return false;
    if (i < h->cursor_rank) {
        h->cursor_rank = 0;
        h->cursor_index = index_of(h->min);
    }
    /* rank < ndistinct, so a non-empty slot always follows the cursor */
    for (; h->cursor_rank < i; h->cursor_rank++)
        h->cursor_index = next_nonempty(h, h->cursor_index + 1);
    *value = lowest_at(h->cursor_index);
    *count = h->counts[h->cursor_index];
    return true;
}

/* ---- percentile iterator ------------------------------------------------- */

/* Mirrors HdrHistogram's PercentileIterator (Java) / percentile_iter_next (C):
 * a row is due when the current slot is non-empty and its cumulative percentile
 * reaches the level; several rows may come from one slot. Once every sample has
 * been counted, one last row at 100% repeats the last slot. */
void hist_iter_init(struct hist_iter *it, const struct hist *h, int ticks_per_half_distance)
{
    *it = (struct hist_iter){
        .h = h,
        ._ticks = ticks_per_half_distance > 0 ? ticks_per_half_distance : 1,
        ._index = h->count ? index_of(h->min) : 0,
        ._total = h->count,
    };
}

/* The level after `level`: ticks steps per halving of the remaining distance to
 * 100%, the halvings counted with the same truncating float expression as
 * HdrHistogram so that the printed levels match it digit for digit. */
static double next_level(double level, int ticks)
{
    double gap = 100.0 - level;
    if (!(gap > 0)) /* already at 100%: log(100 / 0) has no integer value */
        return level;
    int64_t halvings = (int64_t)(log(100.0 / gap) / log(2)) + 1;
    return level + 100.0 / ((double)ticks * ldexp(1.0, (int)halvings));
}

static bool iter_emit(struct hist_iter *it, double percentile)
{
    it->value = highest_at(it->_index);
    it->percentile = percentile;
    it->cumulative = it->_count_to_index;
    return true;
}

bool hist_iter_next(struct hist_iter *it)
{
    const uint64_t *counts = it->h->counts;
    if (it->_done)
        return false;
    if (it->_count_to_index >= it->_total) {
        it->_done = it->_reached_last || it->_total == 0;
        it->_reached_last = true;
        return it->_done ? false : iter_emit(it, 100.0);
    }
    if (it->_count_to_index == 0) /* first call: _index is min's slot */
        it->_count_to_index = counts[it->_index];
    /* Ends at the latest on the last non-empty slot, where the cumulative
     * percentile is 100 and no level exceeds 100. */
    for (;;) {
        double level = it->_percentile_to_iterate_to;
        double reached = 100.0 * (double)it->_count_to_index / (double)it->_total;
        if (counts[it->_index] && reached >= level) {
            it->_percentile_to_iterate_to = next_level(level, it->_ticks);
            return iter_emit(it, level);
        }
        it->_count_to_index += counts[++it->_index];
    }
}

/* ---- HdrHistogram V2 encoding ---------------------------------------------- */

/* Cookies of HdrHistogram's V2 format (the 0x10 says 9-byte LEB128 words). */
#define V2_ENCODING_COOKIE 0x1c849313u
#define V2_COMPRESSED_COOKIE 0x1c849314u
#define V2_HEADER_LEN 40
#define LEB128_MAX 9
#define STORED_MAX 65535 /* RFC 1951 3.2.4: LEN is 16 bits */

static uint8_t *put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static uint8_t *put_be64(uint8_t *p, uint64_t v)
{
    p = put_be32(p, (uint32_t)(v >> 32));
    return put_be32(p, (uint32_t)v);
}

/* HdrHistogram's ZigZag LEB128-64b9B: seven bits a byte with a continuation bit,
 * except that a ninth byte carries the last eight bits whole. */
static uint8_t *put_zigzag(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0);
    for (int n = 0; z >= 0x80 && n < LEB128_MAX - 1; n++) {
        *p++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *p++ = (uint8_t)z;
    return p;
}

/* Counts up to max's slot; a run of empty slots is one negative number. */
static uint8_t *put_counts(uint8_t *p, const struct hist *h)
{
    size_t limit = h->count ? index_of(h->max) + 1 : 0;
    for (size_t i = 0; i < limit;) {
        if (h->counts[i]) {
            p = put_zigzag(p, (int64_t)h->counts[i++]);
            continue;
        }
        size_t zeros = 0;
        while (i < limit && h->counts[i] == 0)
            zeros++, i++;
        p = put_zigzag(p, -(int64_t)zeros);
    }
    return p;
}

/* The uncompressed V2 payload: header, then the counts. */
static size_t v2_payload(const struct hist *h, uint8_t *buf)
{
    uint8_t *end = put_counts(buf + V2_HEADER_LEN, h);
    uint8_t *p = put_be32(buf, V2_ENCODING_COOKIE);
    p = put_be32(p, (uint32_t)(end - buf - V2_HEADER_LEN));
    p = put_be32(p, 0); /* normalizing index offset */
    p = put_be32(p, 3); /* significant figures */
    p = put_be64(p, 1); /* lowest discernible value */
    p = put_be64(p, h->highest);
    double ratio = 1.0; /* integer to double conversion ratio */
    uint64_t bits;
    memcpy(&bits, &ratio, sizeof bits);
    put_be64(p, bits);
    return (size_t)(end - buf);
}

static uint32_t adler32(const uint8_t *p, size_t n)
{
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521;
        b = (b + a) % 65521;
    }
    return b << 16 | a;
}

/* A zlib stream (RFC 1950) of stored deflate blocks (RFC 1951 3.2.4): every
 * inflater reads it, and volley needs no compression library. Returns its length. */
static size_t zlib_stored(const uint8_t *in, size_t n, uint8_t *out)
{
    uint32_t check = adler32(in, n);
    uint8_t *p = out;
    *p++ = 0x78; /* deflate, 32 KiB window */
    *p++ = 0x01; /* no dictionary, fastest level; 0x7801 is a multiple of 31 */
    do {
        size_t len = n < STORED_MAX ? n : STORED_MAX;
        *p++ = n == len; /* BFINAL on the last block, BTYPE 00 */
        *p++ = (uint8_t)len;
        *p++ = (uint8_t)(len >> 8);
        *p++ = (uint8_t)~len;
        *p++ = (uint8_t)(~len >> 8);
        memcpy(p, in, len);
        p += len, in += len, n -= len;
    } while (n);
    return (size_t)(put_be32(p, check) - out);
}

/* External header (cookie, length of what follows), then the zlib stream. */
char *hist_encode(const struct hist *h)
{
    size_t limit = h->count ? index_of(h->max) + 1 : 0;
    size_t max_payload = V2_HEADER_LEN + limit * LEB128_MAX;
    uint8_t *payload = xmalloc(max_payload);
    size_t n = v2_payload(h, payload);
    size_t blocks = n / STORED_MAX + 1;
    uint8_t *wire = xmalloc(8 + 2 + blocks * 5 + n + 4);
    size_t zlen = zlib_stored(payload, n, wire + 8);
    put_be32(put_be32(wire, V2_COMPRESSED_COOKIE), (uint32_t)zlen);
    struct buf b64 = {0};
    buf_append_base64(&b64, wire, 8 + zlen);
    free(wire);
    free(payload);
    return b64.data;
}

/* ---- reading the V2 encoding back ----------------------------------------- */

struct reader {
    const uint8_t *p, *end;
};

static bool get_be32(struct reader *r, uint32_t *v)
{
    if (r->end - r->p < 4)
        return false;
    *v = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
    r->p += 4;
    return true;
}

static bool get_be64(struct reader *r, uint64_t *v)
{
    uint32_t hi, lo;
    if (!get_be32(r, &hi) || !get_be32(r, &lo))
        return false;
    *v = (uint64_t)hi << 32 | lo;
    return true;
}

static int base64_digit(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Strict RFC 4648 base64: whole quads, '=' only as padding at the end. */
static uint8_t *unbase64(const char *s, size_t *len)
{
    size_t n = strlen(s);
    if (n == 0 || n % 4)
        return NULL;
    size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    uint8_t *out = xmalloc(n / 4 * 3), *p = out;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t w = 0;
        for (size_t k = 0; k < 4; k++) {
            int d = i + k >= n - pad ? 0 : base64_digit(s[i + k]);
            if (d < 0) {
                free(out);
                return NULL;
            }
            w = w << 6 | (uint32_t)d;
        }
        *p++ = (uint8_t)(w >> 16);
        *p++ = (uint8_t)(w >> 8);
        *p++ = (uint8_t)w;
    }
    *len = (size_t)(p - out) - pad;
    return out;
}

/* The zlib stream (RFC 1950) of stored blocks that zlib_stored writes. */
static uint8_t *unzlib_stored(struct reader *r, size_t *len, const char **why)
{
    *why = "a broken zlib stream";
    if (r->end - r->p < 2 || (r->p[0] & 0x0f) != 8 || (r->p[0] >> 4) > 7 || (r->p[1] & 0x20) ||
        ((unsigned)r->p[0] << 8 | r->p[1]) % 31)
        return NULL;
    r->p += 2;
    uint8_t *out = xmalloc((size_t)(r->end - r->p) + 1);
    size_t n = 0;
    bool last = false;
    while (!last) {
        if (r->end - r->p < 5)
            goto fail;
        last = r->p[0] & 1;
        if ((r->p[0] >> 1 & 3) != 0) {
            *why = "compressed with deflate (volley reads the stored blocks it writes)";
            goto fail;
        }
        size_t block = (size_t)r->p[1] | (size_t)r->p[2] << 8;
        if (((size_t)r->p[3] | (size_t)r->p[4] << 8) != (~block & 0xffff) ||
            (size_t)(r->end - r->p - 5) < block)
            goto fail;
        memcpy(out + n, r->p + 5, block);
        n += block;
        r->p += 5 + block;
    }
    uint32_t check;
    if (!get_be32(r, &check) || check != adler32(out, n) || r->p != r->end)
        goto fail;
    *len = n;
    return out;
fail:
    free(out);
    return NULL;
}

/* put_zigzag's inverse. */
static bool get_zigzag(struct reader *r, int64_t *v)
{
    uint64_t z = 0;
    for (int n = 0; n < LEB128_MAX; n++) {
        if (r->p == r->end)
            return false;
        uint8_t b = *r->p++;
        if (n == LEB128_MAX - 1) {
            z |= (uint64_t)b << 56;
            break;
        }
        z |= (uint64_t)(b & 0x7f) << (7 * n);
        if (!(b & 0x80))
            break;
    }
    *v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return true;
}

/* The counts after the V2 header, into h; every sample at its bucket's
 * lowest equivalent value. */
static bool get_counts(struct reader *r, struct hist *h, const char **why)
{
    size_t i = 0;
    *why = "broken counts";
    while (r->p < r->end) {
        int64_t v;
        if (!get_zigzag(r, &v))
            return false;
        if (v < 0) {
            if ((uint64_t) - (v + 1) >= h->counts_len - i)
                return false;
            i += (size_t) - (v + 1) + 1;
            continue;
        }
        if (i >= h->counts_len || lowest_at(i) > h->highest) {
            *why = "a count above the highest trackable value";
            return false;
        }
        if (h->count + (uint64_t)v < h->count) {
            *why = "more samples than 64 bits count";
            return false;
        }
        hist_record_n(h, lowest_at(i++), (uint64_t)v);
    }
    return true;
}

static struct hist *v2_payload_read(struct reader *r, const char **why)
{
    uint32_t cookie, length, offset, digits;
    uint64_t lowest, highest, ratio, one;
    double d = 1.0;
    memcpy(&one, &d, sizeof one);
    *why = "not an HdrHistogram V2 payload";
    if (!get_be32(r, &cookie) || cookie != V2_ENCODING_COOKIE || !get_be32(r, &length) ||
        !get_be32(r, &offset) || !get_be32(r, &digits) || !get_be64(r, &lowest) ||
        !get_be64(r, &highest) || !get_be64(r, &ratio) || length != (uint64_t)(r->end - r->p))
        return NULL;
    if (offset != 0 || digits != 3 || lowest != 1 || ratio != one || highest < 2 ||
        highest > (uint64_t)INT64_MAX) {
        *why = "histogram settings other than volley's (lowest 1, 3 significant digits)";
        return NULL;
    }
    struct hist *h = hist_new(highest);
    if (!get_counts(r, h, why)) {
        hist_free(h);
        return NULL;
    }
    return h;
}

struct hist *hist_decode(const char *text, const char **why)
{
    size_t len, plen;
    uint32_t cookie, zlen;
    uint8_t *wire = unbase64(text, &len);
    if (!wire) {
        *why = "not base64";
        return NULL;
    }
    struct reader r = {wire, wire + len};
    struct hist *h = NULL;
    *why = "not an HdrHistogram V2 compressed histogram";
    if (get_be32(&r, &cookie) && cookie == V2_COMPRESSED_COOKIE && get_be32(&r, &zlen) &&
        zlen == (uint64_t)(r.end - r.p)) {
        uint8_t *payload = unzlib_stored(&r, &plen, why);
        if (payload) {
            struct reader pr = {payload, payload + plen};
            h = v2_payload_read(&pr, why);
            free(payload);
        }
    }
    free(wire);
    return h;
}

/* sum and sum_sq are rebuilt from the mean and the standard deviation: the
 * integer part of the squares comes from the sum, so hist_stdev's integer
 * arithmetic gives stdev back without cancellation. */
bool hist_set_summary(struct hist *h, uint64_t min, uint64_t max, double mean, double stdev)
{
    uint64_t n = h->count;
    if (n == 0 || min > max || max > h->highest || index_of(min) != index_of(h->min) ||
        index_of(max) != index_of(h->max) || !(stdev >= 0) ||
        !(mean >= (double)min * (1 - 1e-12)) || !(mean <= (double)max * (1 + 1e-12)) ||
        !(stdev <= (double)(max - min) + 1))
        return false;
    long double m2 = (long double)(n - 1) * stdev * stdev, total = (long double)mean * n;
    /* past 2^127 the running sums could not have held these samples either */
    if (total * mean + m2 >= 0x1p127L)
        return false;
    u128 sum = total < 0x1p63L ? (u128)llroundl(total) : (u128)total;
    u128 q = sum / n, r = sum % n, rr = r * r;
    u128 base = q * q * n + 2 * q * r + rr / n;
    long double whole = m2 + (long double)(rr % n) / n;
    h->min = min;
    h->max = max;
    h->sum = sum;
    h->sum_sq = base + (u128)(whole + 0.5L);
    return true;
}

uint64_t hist_highest(const struct hist *h) { return h->highest; }
