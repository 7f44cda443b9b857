/* volley merge: checks that the parts read (merge_read.c), results and
 * their timelines, can make one run, adds them up into a struct result as
 * one process would have measured it, and prints that with the run's own
 * report, JSON and timeline writers.
 * SPDX-License-Identifier: MIT */
#include "merge.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "merge_read.h"
#include "output.h"
#include "report.h"
#include "threshold.h"
#include "timeline.h"
#include "units.h"
#include "xalloc.h"

/* ---- one run? ------------------------------------------------------------ */

static bool same_value(const struct jdoc *a, const struct jdoc *b);

/* Whether key is one of skip's (a NULL-terminated list, or NULL). */
static bool skipped(const char *key, const char *const *skip)
{
    for (; skip && *skip; skip++)
        if (strcmp(key, *skip) == 0)
            return true;
    return false;
}

/* Every member of a is in b with the same value, except the ones named in
 * skip. */
static bool same_members(const struct jdoc *a, const struct jdoc *b, const char *const *skip)
{
    for (size_t i = 0; i < a->len; i++) {
        const char *key = a->u.members[i].key;
        if (!skipped(key, skip) && !same_value(&a->u.members[i].value, jdoc_get(b, key)))
            return false;
    }
    return true;
}

static bool same_value(const struct jdoc *a, const struct jdoc *b)
{
    if (!a || !b || a->type != b->type || a->len != b->len)
        return false;
    switch (a->type) {
    case JDOC_STRING:
    case JDOC_NUMBER:
        return strcmp(a->u.text, b->u.text) == 0;
    case JDOC_ARRAY:
        for (size_t i = 0; i < a->len; i++)
            if (!same_value(&a->u.items[i], &b->u.items[i]))
                return false;
        return true;
    case JDOC_OBJECT:
        return same_members(a, b, NULL);
    default:
        return true;
    }
}

/* Parts of one run hit the same URL in the same load model; the shards of
 * one sharded run were given the same options and are each there once. */
static void check_same_run(const struct part *p, const struct part *first, const bool *seen)
{
    const char *file = p->file;
    if (strcmp(p->spec.url, first->spec.url) != 0)
        merge_bad(file, "a run against %s, not %s like %s", p->spec.url, first->spec.url,
                  first->file);
    if (p->open_model != first->open_model)
        merge_bad(file, "%s with -R and %s without cannot be one run",
                  p->open_model ? p->file : first->file, p->open_model ? first->file : p->file);
    if (p->counted != first->counted)
        merge_bad(file, "%s with -n and %s without cannot be one run",
                  p->counted ? p->file : first->file, p->counted ? first->file : p->file);
    if (!spec_same_protocols(&p->spec, &first->spec)) {
        char a[128], b[128];
        merge_bad(file, "%s over %s and %s over %s cannot be one run", first->file,
                  spec_protocols_text(&first->spec, false, " or ", a, sizeof a), p->file,
                  spec_protocols_text(&p->spec, false, " or ", b, sizeof b));
    }
    if (!p->spec.shard.count != !first->spec.shard.count)
        merge_bad(file, "a shard and a whole run cannot be parts of one run (%s is %s)",
                  first->file, first->spec.shard.count ? "a shard" : "a whole run");
    if (!p->spec.shard.count)
        return;
    if (p->spec.shard.count != first->spec.shard.count)
        merge_bad(file, "shard %" PRIu64 " of %" PRIu64 ", but %s is one of %" PRIu64,
                  p->spec.shard.index, p->spec.shard.count, first->file, first->spec.shard.count);
    /* threads may differ: a shard with fewer connections than -t has fewer;
     * and the engine, which is where each ran, not what it was asked */
    static const char *const own[] = {"threads", "engine", NULL};
    if (!same_members(first->options, p->options, own) ||
        !same_members(p->options, first->options, own))
        merge_bad(file,
                  "options differ from those of %s: shards of one run are given the same options",
                  first->file);
    if (seen[p->spec.shard.index])
        merge_bad(file, "shard %" PRIu64 " is there twice", p->spec.shard.index);
}

/* ---- timelines with their results ---------------------------------------- */

/* What a check of a timeline against its result found: a figure whose
 * intervals do not add up to the total. */
static void totals_differ(const struct series *s, const char *what, unsigned __int128 sum,
                          uint64_t total)
{
    merge_bad(s->file, "its intervals hold %s%" PRIu64 " %s, but its result %s has %" PRIu64,
              sum > UINT64_MAX ? "more than " : "", sum > UINT64_MAX ? UINT64_MAX : (uint64_t)sum,
              what, s->part->file, total);
}

/* The intervals of a timeline add up exactly to its run's totals: every
 * counter of the table with a timeline column, and the status classes. */
static void check_totals(const struct series *s)
{
    static const char *const classes[6] = {"1xx responses", "2xx responses", "3xx responses",
                                           "4xx responses", "5xx responses", "other responses"};
    const struct slice *t = &s->part->totals;
    for (size_t i = 0; i < stats_ncounters; i++) {
        const struct stats_counter *c = &stats_counters[i];
        if (!c->column || ((c->flags & STATS_OPEN) && !s->open_model))
            continue;
        unsigned __int128 sum = 0;
        for (size_t k = 0; k < s->n; k++)
            sum += s->slices[k].counts[i];
        /* a rate in the records: the counts are the rates times the lengths, rounded */
        if (!(c->flags & STATS_PER_SEC) && sum != t->counts[i])
            totals_differ(s, c->what, sum, t->counts[i]);
    }
    for (int c = 0; c < 6; c++) {
        unsigned __int128 sum = 0;
        for (size_t k = 0; k < s->n; k++)
            sum += s->slices[k].status[c];
        if (sum != t->status[c])
            totals_differ(s, classes[c], sum, t->status[c]);
    }
}

/* Timelines of one run hit the same URL as the results, and have intervals
 * of one length: only then do they add up interval by interval. */
static void check_same_timeline(const struct series *s, const struct series *first,
                                const struct part *first_part)
{
    char a[UNITS_BUF], b[UNITS_BUF];
    if (strcmp(s->url, first_part->spec.url) != 0)
        merge_bad(s->file, "a run against %s, not %s like %s", s->url, first_part->spec.url,
                  first_part->file);
    if (s->interval_us != first->interval_us)
        merge_bad(s->file,
                  "intervals of %s, not %s like %s: timelines add up only interval by "
                  "interval",
                  units_duration(s->interval_us, a), units_duration(first->interval_us, b),
                  first->file);
}

/* The result of the series' run: the same start, to the microsecond, and
 * the same shard. */
static struct part *result_of(const struct inputs *in, const struct series *s)
{
    char when[UNITS_BUF], shard[48] = "";
    struct timespec t = units_timespec(s->start_us);
    for (size_t i = 0; i < in->nparts; i++) {
        struct part *p = &in->parts[i];
        if (p->start_us != s->start_us || p->spec.shard.count != s->shard.count ||
            p->spec.shard.index != s->shard.index)
            continue;
        if (p->series)
            merge_bad(s->file, "the timeline of its run is there already (%s)", p->series->file);
        return p;
    }
    if (s->shard.count)
        snprintf(shard, sizeof shard, "shard %" PRIu64 " of %" PRIu64 ", ", s->shard.index,
                 s->shard.count);
    merge_bad(s->file,
              "the result of its run (%sstarted %s) is not among the files: a timeline is "
              "merged with its run's --json result",
              shard, units_utc_time(&t, when));
}

/* A timeline agrees with its result. */
static void check_with_result(const struct series *s)
{
    char a[UNITS_BUF], b[UNITS_BUF];
    const struct part *p = s->part;
    if (p->interval_us && p->interval_us != s->interval_us)
        merge_bad(s->file, "intervals of %s, but its result %s says %s",
                  units_duration(s->interval_us, a), p->file, units_duration(p->interval_us, b));
    if (s->open_model != p->open_model)
        merge_bad(s->file, "a timeline %s -R, but its result %s is of a run %s",
                  s->open_model ? "with" : "without", p->file, p->open_model ? "with" : "without");
    for (size_t k = 0; k < s->n; k++)
        if (isnan(s->slices[k].server_s) == p->server.known)
            merge_bad(s->file, "interval %zu: server_cpu_s is %s, but its result %s has %s server",
                      k, p->server.known ? "null" : "a number", p->file,
                      p->server.known ? "a" : "no");
    if (s->ended && p->end_known && s->end.reason != p->end.reason)
        merge_bad(s->file, "its end record says the run ended %s, but its result %s says %s",
                  run_end_name(s->end.reason), p->file, run_end_name(p->end.reason));
    check_totals(s);
}

static int by_offset(const void *a, const void *b)
{
    const struct series *x = *(const struct series *const *)a;
    const struct series *y = *(const struct series *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Each part's interval k goes into merged interval offset + k: where its
 * intervals start, after the earliest part's, in intervals, rounded. Parts
 * started with --start-at count their intervals from the same instant (or
 * within milliseconds of it), so their k-th intervals coincide; parts
 * started apart are placed on the nearest interval. The parts cover one
 * stretch of time: one that starts after the others have ended is not part
 * of the same run. */
static void place_series(struct inputs *in)
{
    uint64_t T = in->series[0].interval_us, end = 0;
    struct series **order = xcalloc(in->nseries, sizeof *order);
    in->origin_us = INT64_MAX;
    for (size_t i = 0; i < in->nseries; i++)
        if (in->series[i].origin_us < in->origin_us)
            in->origin_us = in->series[i].origin_us;
    for (size_t i = 0; i < in->nseries; i++) {
        struct series *s = order[i] = &in->series[i];
        s->offset = ((uint64_t)(s->origin_us - in->origin_us) + T / 2) / T;
    }
    qsort(order, in->nseries, sizeof *order, by_offset);
    const struct series *late = NULL;
    for (size_t i = 0; i < in->nseries && !late; i++) {
        const struct series *s = order[i];
        if (s->n && s->offset > end)
            late = s;
        else if (s->n && s->offset + s->n > end)
            end = s->offset + s->n;
    }
    free(order);
    if (late)
        merge_bad(late->file,
                  "it starts %" PRIu64 " intervals after the other timelines end: not part of "
                  "the same run",
                  late->offset - end);
}

/* Every part has its timeline, or none has. */
static void check_timelines(struct inputs *in)
{
    for (size_t i = 0; i < in->nseries; i++) {
        struct series *s = &in->series[i];
        check_same_timeline(s, &in->series[0], &in->parts[0]);
        s->part = result_of(in, s);
        s->part->series = s;
        check_with_result(s);
    }
    if (!in->nseries)
        return;
    for (size_t i = 0; i < in->nparts; i++)
        if (!in->parts[i].series)
            merge_bad(in->parts[i].file, "its timeline is not among the files: merge the "
                                         "timelines of every part, or of none");
    place_series(in);
}

/* ---- the whole ----------------------------------------------------------- */

/* A part's counts as one slice of the whole run: the counters that have a
 * timeline column, and its status codes by class (codes outside 100..599
 * last): what its timeline's intervals add up to. */
static void totals_of(struct slice *sl, const struct stats *t)
{
    memset(sl, 0, sizeof *sl);
    for (size_t i = 0; i < stats_ncounters; i++)
        if (stats_counters[i].column)
            sl->counts[i] = stats_counter_get(t, &stats_counters[i]);
    sl->status[5] = t->requests;
    for (int c = 0; c < 5; c++) {
        for (int code = 100 * (c + 1); code < 100 * (c + 2); code++)
            sl->status[c] += t->status[code];
        sl->status[5] -= sl->status[c];
    }
}

/* The part just read: one run with the first part, added into the whole at
 * once, its statistics and document let go (the first's document stays, to
 * compare the others with): merging a thousand parts takes the memory of
 * a few. */
static void take_part(struct inputs *in, struct part *p)
{
    struct part *first = &in->parts[0];
    if (p == first && first->spec.shard.count)
        in->seen = xcalloc(first->spec.shard.count, sizeof *in->seen);
    check_same_run(p, first, in->seen);
    if (in->seen)
        in->seen[p->spec.shard.index] = true;
    /* stats_merge adds without checks: counts near 2^64 in a hostile file
     * must not wrap round into small ones */
    if (stats_merge_overflows(&in->whole, p->stats))
        merge_bad(p->file, "counts too large to add up (past 2^64)");
    stats_merge(&in->whole, p->stats);
    in->missing |= stats_dists_measured(p->open_model) & ~p->measured;
    totals_of(&p->totals, p->stats);
    stats_free(p->stats);
    free(p->stats);
    p->stats = NULL;
    if (p->warmup_connect) {
        if (!in->warmup_connect)
            in->warmup_connect = hist_new(STATS_LATENCY_MAX);
        hist_merge(in->warmup_connect, p->warmup_connect);
        hist_free(p->warmup_connect);
        p->warmup_connect = NULL;
    }
    if (p != first) {
        jdoc_free(p->doc);
        p->doc = NULL;
        p->options = NULL;
    }
}

static void add_count(const struct part *p, uint64_t *total, uint64_t v, const char *what)
{
    if (*total + v < *total)
        merge_bad(p->file, "the total of %s passes 2^64", what);
    *total += v;
}

/* What the merged result says was asked for: the first part's options,
 * with the connections, rate and requests of all the parts; the intervals
 * of their timelines, and the files to write. */
static void whole_spec(struct run_spec *spec, const struct inputs *in,
                       const struct merge_config *mc)
{
    const struct part *parts = in->parts;
    uint64_t threads = 0, connections = 0, requests = 0;
    double rate = 0;
    for (size_t i = 0; i < in->nparts; i++) {
        const struct shard *share = &parts[i].spec.shard;
        add_count(&parts[i], &threads, parts[i].spec.threads, "threads");
        add_count(&parts[i], &connections, share->connections, "connections");
        add_count(&parts[i], &requests, share->requests, "requests");
        rate += share->rate;
    }
    spec_copy(spec, &parts[0].spec);
    for (size_t i = 1; i < in->nparts; i++)
        if (parts[i].spec.engine != spec->engine)
            spec->engine = SPEC_ENGINE_AUTO; /* no one engine: not said */
    spec->threads = threads;
    spec->connections = connections;
    spec->requests = requests;
    spec->rate = (uint64_t)llround(rate);
    if (parts[0].open_model && spec->rate == 0)
        spec->rate = 1;
    /* the shares of a whole -R add up to it, but for the last bits of a double */
    if (fabs(rate - (double)spec->rate) < 1e-9 * rate)
        rate = (double)spec->rate;
    spec->shard = (struct shard){.connections = connections, .requests = requests, .rate = rate};
    spec->latency = mc->latency;
    spec->u_latency = false;
    /* 0: no intervals known, and the JSON's intervals are null */
    spec->interval_us = in->nseries ? in->series[0].interval_us : 0;
    free(spec->timeline);
    free(spec->hdr_log);
    spec->timeline = mc->timeline ? xstrdup(mc->timeline) : NULL;
    spec->hdr_log = mc->hdr_log ? xstrdup(mc->hdr_log) : NULL;
}

/* volley's own CPU: times add up, the busiest thread is the busiest of all.
 * The CPUs add up too (on separate machines, what the run had). */
static void whole_cpu(struct result *r, const struct inputs *in)
{
    r->cpu.has_wait = true;
    for (size_t i = 0; i < in->nparts; i++) {
        const struct part *p = &in->parts[i];
        r->cpu.user_s += p->cpu.user_s;
        r->cpu.system_s += p->cpu.system_s;
        r->cpu.wait_s += p->cpu.wait_s;
        r->cpu.has_wait &= p->cpu.has_wait;
        r->cpu.busiest = p->cpu.busiest > r->cpu.busiest ? p->cpu.busiest : r->cpu.busiest;
        r->cpu.cpus += (long)p->cpu.cpus;
    }
}

/* --bind: each source address's connections in the whole, the parts'
 * added up address by address (the shards of a run list the same ones, in
 * the same order); NULL when no part bound any. */
static struct result_source *whole_sources(const struct inputs *in, size_t *n)
{
    struct result_source *all = NULL;
    size_t cap = 0;
    *n = 0;
    for (size_t i = 0; i < in->nparts; i++) {
        const struct part *p = &in->parts[i];
        for (size_t k = 0; k < p->nsources; k++) {
            const struct result_source *a = &p->sources[k];
            size_t at = k < *n && strcmp(all[k].address, a->address) == 0 ? k : 0;
            while (at < *n && strcmp(all[at].address, a->address) != 0)
                at++;
            if (at == *n) {
                if (*n == cap)
                    all = xrealloc(all, (cap = cap ? 2 * cap : 16) * sizeof *all);
                all[(*n)++] = (struct result_source){.connects = 0};
                strcpy(all[at].address, a->address);
            }
            add_count(p, &all[at].connects, a->connects, "sources.connects");
            add_count(p, &all[at].errors, a->errors, "sources.connect_errors");
        }
    }
    return all;
}

/* The run's span is from the earliest start to the latest end. */
static void whole_result(struct result *r, struct inputs *in, struct result_input *list)
{
    int64_t start = INT64_MAX, end = INT64_MIN;
    /* added up as the parts were read: the result's now */
    r->stats = in->whole;
    r->missing = in->missing;
    memset(&in->whole, 0, sizeof in->whole);
    for (size_t i = 0; i < in->nparts; i++) {
        const struct part *p = &in->parts[i];
        int64_t p_end = p->start_us + (int64_t)p->duration_us;
        start = p->start_us < start ? p->start_us : start;
        end = p_end > end ? p_end : end;
        if (p->start_late_known && (!r->start_late_known || p->start_late_us > r->start_late_us))
            r->start_late_us = p->start_late_us;
        r->start_late_known |= p->start_late_known;
        list[i] = (struct result_input){p->file,
                                        p->series ? p->series->file : NULL,
                                        p->start_us,
                                        p->duration_us,
                                        p->totals.counts[STATS_COUNTER_requests],
                                        p->spec.shard.count != 0,
                                        p->spec.shard.index};
    }
    whole_cpu(r, in);
    r->runtime_us = (uint64_t)(end - start);
    r->started = units_timespec(start);
    r->pipeline = in->parts[0].pipeline;
    /* a distribution some part lacks (a result of an earlier version) is
     * not the whole's: none rather than a part of it */
    for (size_t i = 0; i < stats_ndists; i++)
        if (r->missing & (1u << i))
            hist_reset(stats_dist_get(&r->stats, &stats_dists[i]));
    r->inputs = list;
    r->ninputs = in->nparts;
    r->sources = whole_sources(in, &r->nsources);
    r->rate_target = r->spec->shard.rate;
    /* completed when every part did; otherwise as the first that did not */
    for (size_t i = 0; i < in->nparts && r->end.reason == END_COMPLETED; i++)
        r->end = in->parts[i].end;
}

/* After the report: each part whose run ended before its end. */
static void warn_cut_short(FILE *f, const struct inputs *in)
{
    char how[80];
    for (size_t i = 0; i < in->nparts; i++) {
        const struct part *p = &in->parts[i];
        if (p->end.reason == END_COMPLETED)
            continue;
        run_end_text(&p->end, how, sizeof how);
        fprintf(f, "Warning: %s: its run %s: the merged result adds up a part cut short\n", p->file,
                how);
    }
}

/* ---- the server ------------------------------------------------------------ */

/* The group of part i, in a forest of parts (union-find). */
static size_t root(size_t *parent, size_t i)
{
    while (parent[i] != i)
        i = parent[i] = parent[parent[i]];
    return i;
}

struct pid_of {
    pid_t pid;
    size_t part;
};

static int by_pid(const void *a, const void *b)
{
    const struct pid_of *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Which parts measured the same server: those whose --server-pid
 * processes have one in common (shards on one machine). Returns each part's
 * group (the index of a part of it), and every process, ascending. */
static size_t *same_servers(const struct inputs *in, pid_t **pids, size_t *npids)
{
    size_t n = 0, *group = xcalloc(in->nparts, sizeof *group);
    for (size_t i = 0; i < in->nparts; i++) {
        group[i] = i;
        n += in->parts[i].server.npids;
    }
    struct pid_of *all = xcalloc(n ? n : 1, sizeof *all);
    n = 0;
    for (size_t i = 0; i < in->nparts; i++)
        for (size_t k = 0; k < in->parts[i].server.npids; k++)
            all[n++] = (struct pid_of){in->parts[i].server.pids[k], i};
    qsort(all, n, sizeof *all, by_pid);
    *pids = xcalloc(n ? n : 1, sizeof **pids);
    *npids = 0;
    for (size_t k = 0; k < n; k++) {
        if (k && all[k].pid == all[k - 1].pid)
            group[root(group, all[k].part)] = root(group, all[k - 1].part);
        else
            (*pids)[(*npids)++] = all[k].pid;
    }
    for (size_t i = 0; i < in->nparts; i++)
        group[i] = root(group, i);
    free(all);
    return group;
}

static double server_cpu_s(const struct part *p) { return p->server.user_s + p->server.system_s; }

/* A server measured by several parts counts once, as the part that
 * measured the most CPU time (each measured it over its own span, within
 * the whole run's); different servers add up. Marks the parts chosen;
 * false when no part measured a server. */
static bool whole_server(struct inputs *in, struct server_times *cpu, pid_t **pids, size_t *npids)
{
    size_t *group = same_servers(in, pids, npids);
    size_t *most = xcalloc(in->nparts, sizeof *most);
    for (size_t i = 0; i < in->nparts; i++)
        most[i] = SIZE_MAX;
    for (size_t i = 0; i < in->nparts; i++) {
        size_t *m = &most[group[i]];
        if (in->parts[i].server.known &&
            (*m == SIZE_MAX || server_cpu_s(&in->parts[i]) > server_cpu_s(&in->parts[*m])))
            *m = i;
    }
    *cpu = (struct server_times){0, 0};
    for (size_t i = 0; i < in->nparts; i++) {
        if (most[i] == SIZE_MAX)
            continue;
        struct part *p = &in->parts[most[i]];
        p->server.chosen = true;
        cpu->user_s += p->server.user_s;
        cpu->system_s += p->server.system_s;
    }
    free(most);
    free(group);
    return *npids > 0;
}

/* ---- the intervals ----------------------------------------------------------- */

static void add_latency(struct hist *dst, const struct series *s, size_t k,
                        const struct stats_dist *d, const struct slice_latency *l)
{
    /* read once already: this cannot fail, but says where if it did */
    char *where = xasprintf("%s: line %zu", s->file, k + 2);
    struct hist *h = merge_read_latency(where, d, l);
    hist_merge(dst, h);
    hist_free(h);
    free(where);
}

/* Adds interval k of the series into the merged interval's statistics:
 * the counters and distributions a record has. A record has the status
 * classes: each class counts at its first code, which is all the
 * timeline's writer adds up. */
static void add_slice(struct stats *acc, const struct series *s, size_t k)
{
    const struct slice *sl = &s->slices[k];
    for (size_t i = 0; i < stats_ncounters; i++)
        if (stats_counters[i].column)
            *stats_counter_at(acc, &stats_counters[i]) += sl->counts[i];
    for (int c = 0; c < 5; c++)
        acc->status[100 * (c + 1)] += sl->status[c];
    acc->status[0] += sl->status[5];
    for (size_t i = 0; i < stats_ndists; i++)
        if (s->measured & (1u << i))
            add_latency(stats_dist_get(acc, &stats_dists[i]), s, k, &stats_dists[i], &sl->dists[i]);
}

/* Merged interval j: every part's interval placed there, added up. It is
 * of full length but for the last, which ends with the whole run (and is at
 * least as long as the longest placed there); span_us is from the start of
 * the first to the end of the run. */
static void merge_interval(struct timeline *t, const struct inputs *in, struct stats *acc,
                           uint64_t j, uint64_t count, uint64_t span_us, bool server)
{
    uint64_t T = in->series[0].interval_us, longest = 0, length = T;
    double server_s = server ? 0 : NAN;
    stats_reset(acc);
    for (size_t i = 0; i < in->nseries; i++) {
        const struct series *s = &in->series[i];
        if (j < s->offset || j - s->offset >= s->n)
            continue;
        const struct slice *sl = &s->slices[j - s->offset];
        add_slice(acc, s, j - s->offset);
        longest = sl->length_us > longest ? sl->length_us : longest;
        if (s->part->server.chosen)
            server_s += sl->server_s;
    }
    if (j + 1 == count) {
        length = span_us > j * T ? span_us - j * T : 0;
        length = longest > length ? longest : length;
    }
    /* whole microseconds of CPU time, without the noise of adding decimals */
    timeline_add(t, acc, j, length, round(server_s * 1e6) / 1e6);
}

static void merge_intervals(struct timeline *t, const struct inputs *in, const struct result *r,
                            bool server)
{
    uint64_t count = 0;
    struct stats acc;
    for (size_t i = 0; i < in->nseries; i++)
        if (in->series[i].n && in->series[i].offset + in->series[i].n > count)
            count = in->series[i].offset + in->series[i].n;
    /* the run ends at its start + runtime_us; the intervals start at origin_us */
    int64_t end =
        (int64_t)(r->started.tv_sec * 1000000 + r->started.tv_nsec / 1000) + (int64_t)r->runtime_us;
    uint64_t span = end > in->origin_us ? (uint64_t)(end - in->origin_us) : 0;
    stats_init(&acc);
    for (uint64_t j = 0; j < count; j++)
        merge_interval(t, in, &acc, j, count, span, server);
    stats_free(&acc);
}

/* The merged intervals, written as a run writes its own, and the server's
 * CPU time over the whole run. */
static struct timeline *whole_timeline(const struct result *r, struct inputs *in)
{
    struct timeline *t = timeline_new(r->spec, NULL, 0);
    struct server_times cpu;
    pid_t *pids;
    size_t npids;
    bool server = whole_server(in, &cpu, &pids, &npids);
    if (server)
        timeline_set_server(t, pids, npids, &cpu);
    free(pids);
    if (in->nseries) {
        uint32_t measured = UINT32_MAX;
        for (size_t i = 0; i < in->nseries; i++)
            measured &= in->series[i].measured;
        timeline_set_measured(t, measured);
        timeline_start_merged(t, &r->started, in->origin_us);
        merge_intervals(t, in, r, server);
        timeline_end(t, &r->end, r->runtime_us);
        timeline_close(t);
    }
    return t;
}

/* ---- output ------------------------------------------------------------------ */

/* "  merged 4 shards of 4, started within 0.42ms": which parts, and how
 * closely they started, before the report of the whole. */
static void describe(FILE *f, const struct inputs *in)
{
    const struct part *parts = in->parts;
    size_t n = in->nparts;
    int64_t first = INT64_MAX, last = INT64_MIN;
    char spread[UNITS_BUF];
    for (size_t i = 0; i < n; i++) {
        first = parts[i].start_us < first ? parts[i].start_us : first;
        last = parts[i].start_us > last ? parts[i].start_us : last;
    }
    if (parts[0].spec.shard.count)
        fprintf(f, "  merged %zu of %" PRIu64 " shards", n, parts[0].spec.shard.count);
    else
        fprintf(f, "  merged %zu results", n);
    fprintf(f, ", started within %s", units_time_us((long double)(last - first), spread));
    if (parts[0].spec.shard.count && n < parts[0].spec.shard.count) {
        fputs("; missing:", f);
        for (uint64_t i = 0; i < parts[0].spec.shard.count; i++)
            if (!in->seen[i])
                fprintf(f, " %" PRIu64, i);
    }
    fputc('\n', f);
}

/* No output may write over another, or over a file being merged. */
static void check_outputs(const struct merge_config *mc)
{
    struct output_use *uses = xcalloc(mc->nfiles + 3, sizeof *uses);
    uses[0] = (struct output_use){"--json", mc->json, NULL};
    uses[1] = (struct output_use){"--timeline", mc->timeline, NULL};
    uses[2] = (struct output_use){"--hdr-log", mc->hdr_log, NULL};
    for (size_t i = 0; i < mc->nfiles; i++)
        uses[3 + i] = (struct output_use){NULL, mc->files[i], "a file to merge"};
    output_check_distinct(uses, mc->nfiles + 3);
    free(uses);
}

static void read_inputs(struct inputs *in, const struct merge_config *mc)
{
    in->parts = xcalloc(mc->nfiles, sizeof *in->parts);
    in->series = xcalloc(mc->nfiles, sizeof *in->series);
    stats_init(&in->whole);
    for (size_t i = 0; i < mc->nfiles; i++) {
        size_t nparts = in->nparts;
        merge_read_file(in, mc->files[i]);
        if (in->nparts > nparts)
            take_part(in, &in->parts[nparts]);
    }
    if (!in->nparts)
        die("no results among the files: volley merge adds up --json results, with their "
            "timelines");
    check_timelines(in);
    if ((mc->timeline || mc->hdr_log) && !in->nseries)
        die("%s: no timelines among the files to merge (give each part's --timeline file with "
            "its result)",
            mc->timeline ? "--timeline" : "--hdr-log");
}

static void free_inputs(struct inputs *in)
{
    stats_free(&in->whole);
    hist_free(in->warmup_connect);
    for (size_t i = 0; i < in->nparts; i++) {
        spec_free(&in->parts[i].spec);
        jdoc_free(in->parts[i].doc);
        free(in->parts[i].server.pids);
        free(in->parts[i].sources);
    }
    for (size_t i = 0; i < in->nseries; i++) {
        for (size_t k = 0; k < in->series[i].n; k++)
            for (size_t d = 0; d < stats_ndists; d++)
                free(in->series[i].slices[k].dists[d].hdr);
        free(in->series[i].slices);
        free(in->series[i].url);
    }
    free(in->parts);
    free(in->series);
    free(in->seen);
}

int merge_main(int argc, char **argv)
{
    struct merge_config mc;
    struct run_spec spec;
    struct result result = {.spec = &spec};
    struct inputs in = {0};
    struct output_json json;
    cli_parse_merge(argc, argv, &mc);
    check_outputs(&mc);
    read_inputs(&in, &mc);
    struct result_input *list = xcalloc(in.nparts, sizeof *list);
    whole_spec(&spec, &in, &mc);
    whole_result(&result, &in, list);
    /* as a run's: with the JSON on stdout, the report goes to stderr */
    if (mc.json)
        output_json_open(&json, mc.json);
    struct timeline *timeline = whole_timeline(&result, &in);
    result.timeline = timeline;

    report_header(stdout, &spec);
    describe(stdout, &in);
    report_text(stdout, &result);
    struct threshold_verdict *verdicts = xcalloc(mc.nthresholds + 1, sizeof *verdicts);
    bool passed = threshold_judge(mc.thresholds, mc.nthresholds, &result.stats, in.warmup_connect,
                                  result.runtime_us, spec.timeout_us, NULL, verdicts);
    if (mc.nthresholds) {
        threshold_print(stdout, verdicts, mc.nthresholds, NULL);
        result.verdicts = verdicts;
        result.nverdicts = mc.nthresholds;
    }
    output_flush_stdout();
    report_warnings(stderr, &result);
    warn_cut_short(stderr, &in);
    if (mc.json)
        output_json_write(&json, report_json, &result);
    timeline_check(timeline);
    output_check();

    free_inputs(&in);
    free(list);
    free((void *)result.sources);
    timeline_free(timeline);
    free(verdicts);
    stats_free(&result.stats);
    spec_free(&spec);
    cli_free_merge(&mc);
    return passed ? 0 : 2;
}
