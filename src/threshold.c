/* Thresholds: "METRIC OP VALUE" with the command line's units, measured the
 * way the JSON document reports the same figures (latency percentiles as
 * HdrHistogram's, success and errors over every attempt), so a verdict can
 * be checked against the document beside it.
 * SPDX-License-Identifier: MIT */
#include "threshold.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hist.h"
#include "json.h"
#include "units.h"
#include "xalloc.h"

#define METRICS                                                                                    \
    "p50, p99.9, mean, max, stdev, connect, rps, requests, errors, success, "                      \
    "status:5xx, status:503"

/* What a metric's value may be written as. */
enum kind {
    KIND_TIME,              /* 200ms, 1.5s: a unit is required */
    KIND_NUMBER,            /* 1.5k */
    KIND_NUMBER_OR_PERCENT, /* 10, or 0.1% */
    KIND_PERCENT,           /* 99.9% */
};

/* "5xx" or "503". */
static bool status_class(const char *s, struct threshold *t)
{
    if (strlen(s) != 3 || s[0] < '1' || s[0] > '9')
        return false;
    if (strcasecmp(s + 1, "xx") == 0) {
        t->status_lo = (s[0] - '0') * 100;
        t->status_hi = t->status_lo + 99;
        return true;
    }
    if (!isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[2]))
        return false;
    t->status_lo = t->status_hi = atoi(s);
    return true;
}

/* "p99.9": a percentile above 0, up to 100. */
static bool percentile(const char *name, struct threshold *t, char *err, size_t errlen)
{
    double p;
    const char *digits = name + 1;
    if (!isdigit((unsigned char)*digits) || !units_parse_real_metric(digits, &p) ||
        strspn(digits, "0123456789.") != strlen(digits) || p <= 0 || p > 100)
        return xfail(err, errlen, "invalid percentile '%s': from p0.001 to p100", name);
    t->metric = THRESHOLD_PERCENTILE;
    t->percentile = p;
    return true;
}

static bool metric(const char *name, struct threshold *t, enum kind *kind, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        enum threshold_metric metric;
        enum kind kind;
    } names[] = {
        {"mean", THRESHOLD_MEAN, KIND_TIME},
        {"max", THRESHOLD_MAX, KIND_TIME},
        {"stdev", THRESHOLD_STDEV, KIND_TIME},
        {"connect", THRESHOLD_CONNECT, KIND_TIME},
        {"rps", THRESHOLD_RPS, KIND_NUMBER},
        {"requests", THRESHOLD_REQUESTS, KIND_NUMBER},
        {"errors", THRESHOLD_ERRORS, KIND_NUMBER_OR_PERCENT},
        {"success", THRESHOLD_SUCCESS, KIND_PERCENT},
    };
    const char *space = strchr(name, ' ');
    if (space) { /* a distribution's statistic: of a latency's only */
        const char *stat = space + 1;
        bool latency = (stat[0] == 'p' && isdigit((unsigned char)stat[1])) ||
                       strcmp(stat, "mean") == 0 || strcmp(stat, "max") == 0 ||
                       strcmp(stat, "stdev") == 0;
        if (!latency)
            return xfail(err, errlen, "unknown metric '%s' (after %.*s: pN, mean, max or stdev)",
                         name, (int)(space - name), name);
        name = stat;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name) == 0) {
            t->metric = names[i].metric;
            *kind = names[i].kind;
            return true;
        }
    }
    if (strncmp(name, "status:", 7) == 0) {
        if (!status_class(name + 7, t))
            return xfail(err, errlen,
                         "invalid status '%s': a code (status:503) or a class "
                         "(status:5xx)",
                         name + 7);
        t->metric = THRESHOLD_STATUS;
        *kind = KIND_NUMBER_OR_PERCENT;
        return true;
    }
    if (name[0] == 'p' && isdigit((unsigned char)name[1])) {
        *kind = KIND_TIME;
        return percentile(name, t, err, errlen);
    }
    return xfail(err, errlen, "unknown metric '%s' (%s)", name, METRICS);
}

/* The limit, in the metric's unit. */
static bool limit(const char *value, const char *name, enum kind kind, struct threshold *t,
                  char *err, size_t errlen)
{
    size_t len = strlen(value);
    bool percent = len && value[len - 1] == '%';
    if (percent) {
        char *number = xstrndup(value, len - 1);
        bool ok = strspn(number, "0123456789. ") == strlen(number) &&
                  units_parse_real_metric(number, &t->limit);
        free(number);
        if (kind == KIND_TIME || kind == KIND_NUMBER)
            return xfail(err, errlen, "%s is not a percentage: '%s'", name, value);
        if (!ok)
            return xfail(err, errlen, "invalid percentage '%s'", value);
        if (t->limit > 100)
            return xfail(err, errlen, "invalid percentage '%s': at most 100%%", value);
        t->percent = true;
        return true;
    }
    switch (kind) {
    case KIND_TIME:
        if (!units_parse_real_time(value, &t->limit))
            return xfail(err, errlen, "invalid latency '%s': expected a time such as 200ms", value);
        /* A bare number would be seconds, as for -d: never what "p99 < 200" means. */
        if (!isalpha((unsigned char)value[len - 1]))
            return xfail(err, errlen, "a latency needs a unit: '%sms' or '%ss'", value, value);
        return true;
    case KIND_PERCENT:
        return xfail(err, errlen, "%s is a percentage: '%s%%'", name, value);
    default:
        if (!units_parse_real_metric(value, &t->limit))
            return xfail(err, errlen, "invalid number '%s'", value);
        return true;
    }
}

static const char *const op_names[] = {"<", "<=", ">", ">="};

/* The operator at *s, which moves past it. */
static bool op(const char **s, enum threshold_op *out)
{
    const char *p = *s;
    if (*p != '<' && *p != '>')
        return false;
    bool eq = p[1] == '=';
    *out = *p == '<' ? (eq ? THRESHOLD_LE : THRESHOLD_LT) : (eq ? THRESHOLD_GE : THRESHOLD_GT);
    *s = p + 1 + eq;
    return true;
}

static const char *skip_space(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

/* The word at s (up to a space or an operator), in lower case, to free;
 * *end past it. */
static char *word(const char *s, const char **end)
{
    const char *start = s;
    while (*s && !isspace((unsigned char)*s) && !strchr("<>=!", *s))
        s++;
    *end = s;
    char *w = xstrndup(start, (size_t)(s - start));
    for (char *c = w; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    return w;
}

/* The distribution a latency metric may name first ("ttfb p99"): one with
 * a value per response; -1 for none. */
static int distribution(const char *name)
{
    for (size_t i = 0; i < stats_ndists; i++)
        if ((stats_dists[i].flags & STATS_PER_RESPONSE) && strcmp(stats_dists[i].key, name) == 0)
            return (int)i;
    return -1;
}

/* Splits "METRIC OP VALUE" into the metric, in lower case (a distribution
 * and its statistic: "ttfb p99", or one word), the operator, and the value
 * without the spaces around it (*name and *value to free). */
static bool split(const char *expr, struct threshold *t, char **name, char **value, char *err,
                  size_t errlen)
{
    const char *s = skip_space(expr), *after;
    *name = word(s, &after);
    if (after == s)
        return xfail(err, errlen, "expected METRIC OP VALUE, as in 'p99 < 200ms'");
    s = skip_space(after);
    int dist = distribution(*name);
    t->dist = STATS_DIST_latency;
    if (dist >= 0 && *s && !strchr("<>=!", *s)) {
        char *stat = word(s, &after), *both = xasprintf("%s %s", *name, stat);
        free(*name);
        free(stat);
        *name = both;
        t->dist = (size_t)dist;
        s = skip_space(after);
    }
    if (!op(&s, &t->op))
        return xfail(err, errlen, "expected <, <=, > or >= after '%s'", *name);
    s = skip_space(s);
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (!len)
        return xfail(err, errlen, "missing the value after '%s %s'", *name, op_names[t->op]);
    *value = xstrndup(s, len);
    return true;
}

bool threshold_parse(const char *expr, struct threshold *t, char *err, size_t errlen)
{
    enum kind kind;
    char *name = NULL, *value = NULL;
    memset(t, 0, sizeof *t);
    bool ok = split(expr, t, &name, &value, err, errlen) && metric(name, t, &kind, err, errlen) &&
              limit(value, name, kind, t, err, errlen);
    if (ok) {
        size_t n = strlen(name) + strlen(value) + 6;
        t->text = xmalloc(n);
        snprintf(t->text, n, "%s %s %s", name, op_names[t->op], value);
        t->name_len = strlen(name);
    }
    free(name);
    free(value);
    return ok;
}

void threshold_free(struct threshold *t)
{
    free(t->text);
    t->text = NULL;
}

/* ---- measuring ----------------------------------------------------------- */

static struct threshold_value known(double v) { return (struct threshold_value){true, false, v}; }

static const struct threshold_value unknown = {false, false, 0};

/* Requests that ended in an error of any class but status. */
static uint64_t socket_errors(const struct stats *s)
{
    const struct errors *e = &s->errors;
    return e->connect + e->read + e->write + e->timeout;
}

/* Percentile p over the responses and the requests that timed out, ranked
 * as hist_value_at_percentile ranks; the timed out are the slowest. */
static struct threshold_value latency_at(const struct hist *h, double p, uint64_t timeouts,
                                         uint64_t timeout_us)
{
    uint64_t n = hist_count(h), total = n + timeouts;
    if (total == 0)
        return unknown;
    if (timeouts == 0)
        return known((double)hist_value_at_percentile(h, p));
    double c = (p < 100 ? p : 100) * (double)total / 100 + 0.5;
    uint64_t rank = c >= (double)total ? total : c >= 1 ? (uint64_t)c : 1;
    if (rank > n)
        return (struct threshold_value){true, true, (double)timeout_us};
    return known((double)hist_value_at_percentile(h, 100.0 * (double)rank / (double)n));
}

static uint64_t status_count(const struct threshold *t, const struct stats *s)
{
    uint64_t n = 0;
    for (int code = t->status_lo; code <= t->status_hi && code < STATS_STATUS_MAX; code++)
        n += s->status[code];
    return n;
}

static struct threshold_value share(uint64_t part, uint64_t whole)
{
    return whole ? known(100.0 * (double)part / (double)whole) : unknown;
}

struct threshold_value threshold_measure(const struct threshold *t, const struct stats *s,
                                         uint64_t length_us, uint64_t timeout_us)
{
    const struct hist *lat = stats_dist_get(s, &stats_dists[t->dist]);
    uint64_t responses = s->requests, attempts = responses + socket_errors(s);
    uint64_t timeouts = s->errors.timeout;
    switch (t->metric) {
    case THRESHOLD_PERCENTILE:
        return latency_at(lat, t->percentile, timeouts, timeout_us);
    case THRESHOLD_MAX: /* exact, as latency.max in the document */
        if (timeouts)
            return (struct threshold_value){true, true, (double)timeout_us};
        return hist_count(lat) ? known((double)hist_max(lat)) : unknown;
    case THRESHOLD_MEAN:
        return hist_count(lat) ? known(hist_mean(lat)) : unknown;
    case THRESHOLD_STDEV:
        return hist_count(lat) ? known(hist_stdev(lat)) : unknown;
    case THRESHOLD_CONNECT:
        return hist_count(s->connect) ? known((double)hist_value_at_percentile(s->connect, 99))
                                      : unknown;
    case THRESHOLD_RPS:
        return length_us ? known((double)responses * 1e6 / (double)length_us) : unknown;
    case THRESHOLD_REQUESTS:
        return known((double)responses);
    case THRESHOLD_ERRORS:
        return t->percent ? share(stats_errors(s), attempts) : known((double)stats_errors(s));
    case THRESHOLD_SUCCESS:
        return share(responses - s->errors.status, attempts);
    case THRESHOLD_STATUS:
        return t->percent ? share(status_count(t, s), responses)
                          : known((double)status_count(t, s));
    }
    return unknown;
}

bool threshold_holds(const struct threshold *t, const struct threshold_value *v)
{
    if (!v->known)
        return false;
    if (v->timeouts) /* longer than any limit */
        return t->op == THRESHOLD_GT || t->op == THRESHOLD_GE;
    switch (t->op) {
    case THRESHOLD_LT:
        return v->value < t->limit;
    case THRESHOLD_LE:
        return v->value <= t->limit;
    case THRESHOLD_GT:
        return v->value > t->limit;
    case THRESHOLD_GE:
        return v->value >= t->limit;
    }
    return false;
}

/* ---- verdicts -------------------------------------------------------------- */

bool threshold_judge(const struct threshold *ts, size_t n, const struct stats *s,
                     const struct hist *warmup_connect, uint64_t runtime_us, uint64_t timeout_us,
                     const struct threshold_abort *abort, struct threshold_verdict *out)
{
    bool all = true;
    /* the run's statistics, with the warm-up's connections among its own */
    struct stats view = *s;
    if (warmup_connect) {
        view.connect = hist_new(hist_highest(s->connect));
        hist_merge(view.connect, s->connect);
        hist_merge(view.connect, warmup_connect);
    }
    for (size_t i = 0; i < n; i++) {
        out[i].t = &ts[i];
        out[i].v = threshold_measure(&ts[i], &view, runtime_us, timeout_us);
        out[i].passed = threshold_holds(&ts[i], &out[i].v) && !(abort && abort->threshold == i);
        all &= out[i].passed;
    }
    if (warmup_connect)
        hist_free(view.connect);
    return all;
}

static bool is_latency(const struct threshold *t) { return t->metric <= THRESHOLD_CONNECT; }

/* A percentage with up to four decimals, without trailing zeros: 25, 99.95. */
static char *percentage(double v, char buf[UNITS_BUF])
{
    snprintf(buf, UNITS_BUF, "%.4f", v);
    char *end = buf + strlen(buf);
    while (end[-1] == '0')
        *--end = 0;
    if (end[-1] == '.')
        end[-1] = 0;
    strcat(buf, "%");
    return buf;
}

/* The value as the expression would write it. */
static char *format_value(const struct threshold *t, double v, char buf[UNITS_BUF])
{
    if (is_latency(t))
        return units_time_us(v, buf);
    if (t->percent || t->metric == THRESHOLD_SUCCESS)
        return percentage(v, buf);
    snprintf(buf, UNITS_BUF, t->metric == THRESHOLD_RPS ? "%.2f" : "%.0f", v);
    return buf;
}

static void print_one(FILE *f, const struct threshold_verdict *v, const struct threshold_abort *a,
                      size_t i)
{
    const struct threshold *t = v->t;
    int name = (int)t->name_len;
    char buf[UNITS_BUF], from[UNITS_BUF], to[UNITS_BUF];
    fprintf(f, "Threshold %s: %s (", t->text, v->passed ? "passed" : "FAILED");
    if (!v->v.known)
        fprintf(f, "%.*s: nothing measured", name, t->text);
    else if (v->v.timeouts)
        fprintf(f, "%.*s >= %s: requests timed out", name, t->text, units_time_us(v->v.value, buf));
    else
        fprintf(f, "%.*s = %s", name, t->text, format_value(t, v->v.value, buf));
    if (a && a->threshold == i) {
        uint64_t n = a->last - a->first + 1;
        fprintf(f, "; failed in %" PRIu64 " interval%s in a row, %s to %s: the run was stopped", n,
                n == 1 ? "" : "s", units_time_us((long double)a->from_us, from),
                units_time_us((long double)a->to_us, to));
    }
    fputs(")\n", f);
}

void threshold_print(FILE *f, const struct threshold_verdict *v, size_t n,
                     const struct threshold_abort *abort)
{
    for (size_t i = 0; i < n; i++)
        print_one(f, &v[i], abort, i);
}

/* A whole value stays an integer in the document. */
static void json_number(struct json *j, const char *key, double v)
{
    if (v >= 0 && v == floor(v) && v < 0x1p64)
        json_uint(j, key, (uint64_t)v);
    else
        json_double(j, key, v);
}

void threshold_json(struct json *j, const struct threshold_verdict *v, size_t n,
                    const struct threshold_abort *abort)
{
    if (!v) {
        json_null(j, "thresholds");
    } else {
        json_array_begin(j, "thresholds");
        for (size_t i = 0; i < n; i++) {
            json_object_begin(j, NULL);
            json_string(j, "expression", v[i].t->text);
            json_bool(j, "passed", v[i].passed);
            if (v[i].v.known)
                json_number(j, "value", v[i].v.value);
            else
                json_null(j, "value");
            json_bool(j, "timed_out", v[i].v.timeouts);
            json_object_end(j);
        }
        json_array_end(j);
    }
    if (!abort) {
        json_null(j, "aborted");
        return;
    }
    json_object_begin(j, "aborted");
    json_string(j, "expression", v ? v[abort->threshold].t->text : NULL);
    json_uint(j, "first_interval", abort->first);
    json_uint(j, "last_interval", abort->last);
    json_uint(j, "from_us", abort->from_us);
    json_uint(j, "to_us", abort->to_us);
    json_object_end(j);
}

/* ---- interval by interval -------------------------------------------------- */

struct threshold_watch {
    const struct threshold *ts;
    size_t n;
    uint64_t after, timeout_us;
    struct stats total; /* the intervals so far, for counts */
    struct {
        uint64_t failing; /* intervals in a row it failed in */
        uint64_t first, from_us;
    } * state;
};

struct threshold_watch *threshold_watch_new(const struct threshold *ts, size_t n, uint64_t after,
                                            uint64_t timeout_us)
{
    struct threshold_watch *w = xcalloc(1, sizeof *w);
    w->ts = ts;
    w->n = n;
    w->after = after ? after : 1;
    w->timeout_us = timeout_us;
    stats_init(&w->total);
    w->state = xcalloc(n ? n : 1, sizeof *w->state);
    return w;
}

void threshold_watch_free(struct threshold_watch *w)
{
    if (!w)
        return;
    stats_free(&w->total);
    free(w->state);
    free(w);
}

static bool is_count(const struct threshold *t)
{
    return t->metric == THRESHOLD_REQUESTS ||
           ((t->metric == THRESHOLD_ERRORS || t->metric == THRESHOLD_STATUS) && !t->percent);
}

/* Whether the threshold fails in this interval; unknown when it cannot tell. */
static bool failing(struct threshold_watch *w, const struct threshold *t, const struct stats *s,
                    uint64_t length_us, bool *tells)
{
    struct threshold_value v;
    *tells = true;
    if (is_count(t)) {
        /* A total only grows: one under a limit can fail before the end,
         * one that must reach a figure only at the end. */
        if (t->op == THRESHOLD_GT || t->op == THRESHOLD_GE) {
            *tells = false;
            return false;
        }
        v = threshold_measure(t, &w->total, 0, w->timeout_us);
    } else {
        v = threshold_measure(t, s, length_us, w->timeout_us);
    }
    *tells = v.known;
    return v.known && !threshold_holds(t, &v);
}

bool threshold_watch_interval(struct threshold_watch *w, const struct stats *s, uint64_t index,
                              uint64_t start_us, uint64_t length_us, struct threshold_abort *abort)
{
    stats_merge(&w->total, s);
    for (size_t i = 0; i < w->n; i++) {
        bool tells;
        bool fails = failing(w, &w->ts[i], s, length_us, &tells);
        if (!tells) /* no response in it: neither breaks a run of failures nor adds to it */
            continue;
        if (!fails) {
            w->state[i].failing = 0;
            continue;
        }
        if (w->state[i].failing++ == 0) {
            w->state[i].first = index;
            w->state[i].from_us = start_us;
        }
        if (w->state[i].failing >= w->after) {
            *abort = (struct threshold_abort){i, w->state[i].first, index, w->state[i].from_us,
                                              start_us + length_us};
            return true;
        }
    }
    return false;
}
