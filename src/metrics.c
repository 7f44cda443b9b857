/* Live metrics: main's running totals and the families made from them. The
 * totals are the intervals the timeline takes, added up as they come, so a
 * scrape reads figures main owns and never waits for a worker; the run's
 * final merge replaces them at the end, so that the last values are
 * exactly --json's. A warm-up is left out, as from every result: counters
 * start at 0 when what is measured starts and only grow from there.
 *
 * Every family is written through one small interface (struct writer): as
 * the text exposition format (Prometheus 0.0.4) for /metrics, rendered
 * once per update and served as it is to every scrape, and as remote
 * write's samples, one per series, stamped with the end of the interval.
 * Counters and histograms come from the table of figures in stats.h: a
 * row with a metric name is a family here.
 * SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "buf.h"
#include "cli.h"
#include "clock.h"
#include "json.h"
#include "net.h"
#include "profile.h"
#include "protocols.h"
#include "remote_write.h"
#include "report.h"
#include "scrape.h"
#include "spec.h"
#include "stats.h"
#include "timeline.h"
#include "worker.h"
#include "xalloc.h"

static const uint64_t default_buckets[] = {METRICS_BUCKETS_DEFAULT};

struct metrics {
    const struct run_spec *spec;
    const uint64_t *bounds; /* the histograms' buckets, us */
    size_t nbounds;
    struct stats total; /* the intervals so far; the result's at the end */
    /* the figures besides the table's, as of the last update */
    double duration_s, client_cpu_s, server_cpu_s, target_rate;
    uint64_t connections;
    bool has_server;
    /* where they come from */
    struct worker **workers;
    size_t nworkers;
    const struct timeline *timeline;
    struct profile profile; /* -R, --stages */
    struct rusage base;     /* the process's CPU time when the run started */
    int64_t started_ms;     /* the start of what is measured, Unix time in ms */
    int64_t last_ms;        /* the last push's timestamp */
    uint64_t final_us;      /* clock_us of the final figures */
    /* the run's labels, on every series: url, shard (a sharded run) and
     * --label's, then room for the __name__ and the series' own */
    const char **names, **values;
    size_t nlabels;
    char shard[24];
    /* where they go */
    struct ev_loop *loop;
    char *listen;
    struct scrape *scrape;
    struct buf text;
    struct remote_write *rw;
    bool strict;
    uint64_t linger_us;
};

/* ---- the families --------------------------------------------------------- */

enum family_type { FAMILY_COUNTER, FAMILY_GAUGE, FAMILY_HISTOGRAM };

static const char *const type_names[] = {"counter", "gauge", "histogram"};

/* What the families are written to. A sample has the run's labels, and at
 * most one of its own (status, cause, le...). */
struct writer {
    void (*family)(struct writer *w, const char *name, enum family_type type, const char *help);
    void (*sample)(struct writer *w, const char *name, const char *label, const char *value,
                   double v);
};

/* Whether the run has the figures of place: TLS's over https, a proxy's
 * through one, a protocol's when one of the protocols it offers is that
 * one. */
static bool offered(const struct run_spec *spec, enum stats_place place)
{
    switch (place) {
    case STATS_AT_TLS:
        return spec->tls;
    case STATS_AT_PROXY:
        return spec->proxy != NULL;
    case STATS_AT_HTTP2:
    case STATS_AT_HTTP3:
        return spec_offers_figures(spec, place);
    default:
        return true;
    }
}

static void family(struct writer *w, char *name, size_t size, const char *metric,
                   enum family_type type, const char *help)
{
    snprintf(name, size, "volley_%s", metric);
    w->family(w, name, type, help);
}

static void sample(struct writer *w, const char *name, const char *suffix, const char *label,
                   const char *value, double v)
{
    char full[144];
    snprintf(full, sizeof full, "%s%s", name, suffix);
    w->sample(w, full, label, value, v);
}

/* A counter of the table: counted (a STATS_MIN figure is a gauge, absent
 * while no part has one), in seconds when it counts microseconds. The
 * error classes are one family, labelled by class. */
static void table_counters(struct writer *w, const struct metrics *m)
{
    const char *last = NULL;
    char name[128], help[160];
    for (size_t i = 0; i < stats_ncounters; i++) {
        const struct stats_counter *c = &stats_counters[i];
        uint64_t v = stats_counter_get(&m->total, c);
        const char *object = stats_place_object(c->place);
        if (!c->metric || !offered(m->spec, c->place))
            continue;
        if (!last || strcmp(last, c->metric) != 0) {
            bool errors = c->place == STATS_AT_ERRORS;
            snprintf(help, sizeof help, "As --json's %s%s%s%s", errors ? "errors by class" : "",
                     !errors && object ? object : "", !errors && object ? "." : "",
                     errors ? "" : c->key);
            family(w, name, sizeof name, c->metric,
                   c->rule == STATS_MIN ? FAMILY_GAUGE : FAMILY_COUNTER, help);
            last = c->metric;
        }
        if (c->rule == STATS_MIN && v == UINT64_MAX)
            continue;
        double value = (c->flags & STATS_MICROS) ? (double)v / 1e6 : (double)v;
        if (c->place == STATS_AT_ERRORS)
            sample(w, name, "", "class", c->key, value);
        else
            sample(w, name, "", NULL, NULL, value);
    }
}

static void responses(struct writer *w, const struct stats *s)
{
    char name[128], code[8];
    family(w, name, sizeof name, "responses_total", FAMILY_COUNTER,
           "Responses by status code (as --json's status_codes)");
    for (int i = 1; i < STATS_STATUS_MAX; i++) {
        if (s->status[i]) {
            snprintf(code, sizeof code, "%d", i);
            sample(w, name, "", "status", code, (double)s->status[i]);
        }
    }
    if (s->status[0])
        sample(w, name, "", "status", "other", (double)s->status[0]);
}

/* The connections by the protocol they spoke (with --alpn, a mix). */
static void protocols(struct writer *w, const struct stats *s)
{
    char name[128];
    family(w, name, sizeof name, "protocol_connections_total", FAMILY_COUNTER,
           "Connections by the protocol they spoke (as --json's protocols)");
    for (size_t i = 0; i < PROTOCOLS_COUNT; i++)
        sample(w, name, "", "protocol", protocols_all[i]->name, (double)s->by_protocol[i]);
}

/* Every cause, 0 or not: a cause that appears mid-run then has a rate from
 * its first error on. */
static void causes(struct writer *w, const struct metrics *m)
{
    char name[128];
    family(w, name, sizeof name, "errors_total", FAMILY_COUNTER,
           "Socket errors by cause (as --json's error_causes)");
    for (int c = 0; c < CAUSE_COUNT; c++)
        sample(w, name, "", "cause", stats_cause_name(c), (double)m->total.causes[c]);
    /* The breakdowns by code of a protocol's figures: PLACE_KEY_total{code}
     * (http2_rst_stream_received_total), as --json's PLACE.KEY. */
    for (size_t i = 0; i < stats_nbreakdowns; i++) {
        const struct stats_breakdown *b = &stats_breakdowns[i];
        if (!b->name || !offered(m->spec, b->place))
            continue;
        const char *place = stats_place_object(b->place);
        char metric[96], help[128], code_name[STATS_CODE_NAME_MAX];
        snprintf(metric, sizeof metric, "%s_%s_total", place, b->key);
        snprintf(help, sizeof help, "By code (as --json's %s.%s)", place, b->key);
        family(w, name, sizeof name, metric, FAMILY_COUNTER, help);
        const uint64_t *counts = stats_breakdown_at((struct stats *)&m->total, b);
        /* by HTTP status, as responses_total: only those counted, of 999 */
        bool all = b->name != stats_status_name;
        for (unsigned code = 0; code < b->n; code++)
            if (all || counts[code])
                sample(w, name, "", "code", b->name(code, code_name), (double)counts[code]);
    }
}

/* A distribution as a histogram in seconds: cumulative counts at the
 * bounds, as the HdrHistogram has them, then +Inf, the sum and the count. */
static void histogram(struct writer *w, const struct metrics *m, const struct stats_dist *d)
{
    const struct hist *h = stats_dist_get(&m->total, d);
    char name[128], help[128], le[32];
    uint64_t *counts = xcalloc(m->nbounds + 1, sizeof *counts);
    snprintf(help, sizeof help, "As --json's %s, in seconds", d->key);
    family(w, name, sizeof name, d->metric, FAMILY_HISTOGRAM, help);
    hist_count_at_most(h, m->bounds, m->nbounds, counts);
    for (size_t i = 0; i < m->nbounds; i++)
        sample(w, name, "_bucket", "le", json_format_double(le, (double)m->bounds[i] / 1e6),
               (double)counts[i]);
    sample(w, name, "_bucket", "le", "+Inf", (double)hist_count(h));
    sample(w, name, "_sum", NULL, NULL, hist_sum(h) / 1e6);
    sample(w, name, "_count", NULL, NULL, (double)hist_count(h));
    free(counts);
}

static void gauge(struct writer *w, const char *metric, const char *help, double v)
{
    char name[128];
    family(w, name, sizeof name, metric, FAMILY_GAUGE, help);
    sample(w, name, "", NULL, NULL, v);
}

static void counter(struct writer *w, const char *metric, const char *help, double v)
{
    char name[128];
    family(w, name, sizeof name, metric, FAMILY_COUNTER, help);
    sample(w, name, "", NULL, NULL, v);
}

static void families(struct writer *w, const struct metrics *m)
{
    char name[128];
    family(w, name, sizeof name, "build_info", FAMILY_GAUGE, "The volley version that measures");
    sample(w, name, "", "version", VOLLEY_VERSION, 1);
    gauge(w, "duration_seconds", "Run time measured so far (as --json's duration_us)",
          m->duration_s);
    table_counters(w, m);
    responses(w, &m->total);
    causes(w, m);
    protocols(w, &m->total);
    uint32_t measured = stats_dists_measured(m->spec->rate != 0);
    for (size_t i = 0; i < stats_ndists; i++)
        if (stats_dists[i].metric && (measured & (1u << i)))
            histogram(w, m, &stats_dists[i]);
    gauge(w, "connections", "Connections open now", (double)m->connections);
    if (m->spec->rate)
        gauge(w, "target_rate", "The request rate asked for now (-R, --stages), per second",
              m->target_rate);
    counter(w, "client_cpu_seconds_total", "CPU time volley used (as --json's cpu)",
            m->client_cpu_s);
    if (m->has_server)
        counter(w, "server_cpu_seconds_total",
                "CPU time the server used, --server-pid (as --json's server.cpu_s)",
                m->server_cpu_s);
}

/* ---- the text exposition format -------------------------------------------- */

struct text_writer {
    struct writer w;
    struct buf *out;
    const struct metrics *m;
};

static void append(struct buf *b, const char *s) { buf_append(b, s, strlen(s)); }

/* A label value or HELP text: backslash and newline escaped, and in a label
 * value the double quote. */
static void escaped(struct buf *b, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            append(b, "\\\\");
        else if (*s == '\n')
            append(b, "\\n");
        else if (*s == '"' && quote)
            append(b, "\\\"");
        else
            buf_append(b, s, 1);
    }
}

static void text_label(struct buf *b, bool *first, const char *name, const char *value)
{
    append(b, *first ? "{" : ",");
    *first = false;
    append(b, name);
    append(b, "=\"");
    escaped(b, value, true);
    append(b, "\"");
}

static void text_family(struct writer *w, const char *name, enum family_type type, const char *help)
{
    struct buf *b = ((struct text_writer *)w)->out;
    append(b, "# HELP ");
    append(b, name);
    append(b, " ");
    escaped(b, help, false);
    append(b, "\n# TYPE ");
    append(b, name);
    append(b, " ");
    append(b, type_names[type]);
    append(b, "\n");
}

/* The run's labels: url, shard (a sharded run) and --label's. */
static void run_labels(struct metrics *m)
{
    const struct run_spec *spec = m->spec;
    m->names = xcalloc(spec->nlabels + 4, sizeof *m->names);
    m->values = xcalloc(spec->nlabels + 4, sizeof *m->values);
    m->names[m->nlabels] = "url";
    m->values[m->nlabels++] = spec->url;
    if (spec->shard.count) {
        snprintf(m->shard, sizeof m->shard, "%" PRIu64, spec->shard.index);
        m->names[m->nlabels] = "shard";
        m->values[m->nlabels++] = m->shard;
    }
    for (size_t i = 0; i < spec->nlabels; i++) {
        m->names[m->nlabels] = spec->labels[i].name;
        m->values[m->nlabels++] = spec->labels[i].value;
    }
}

static void text_sample(struct writer *w, const char *name, const char *label, const char *value,
                        double v)
{
    const struct metrics *m = ((struct text_writer *)w)->m;
    struct buf *b = ((struct text_writer *)w)->out;
    char number[32];
    bool first = true;
    append(b, name);
    for (size_t i = 0; i < m->nlabels; i++)
        text_label(b, &first, m->names[i], m->values[i]);
    if (label)
        text_label(b, &first, label, value);
    append(b, first ? " " : "} ");
    append(b, json_format_double(number, v));
    append(b, "\n");
}

/* The text exposition format of the figures as they stand. */
static void metrics_text(struct metrics *m, struct buf *out)
{
    struct text_writer t = {{text_family, text_sample}, out, m};
    buf_clear(out);
    families(&t.w, m);
}

/* ---- remote write's samples ------------------------------------------------------ */

struct series_writer {
    struct writer w;
    struct buf *out; /* the WriteRequest */
    const struct metrics *m;
    int64_t ts_ms;
};

static void series_family(struct writer *w, const char *name, enum family_type type,
                          const char *help)
{
    (void)w, (void)name, (void)type, (void)help;
}

static void series_sample(struct writer *w, const char *name, const char *label, const char *value,
                          double v)
{
    struct series_writer *sw = (struct series_writer *)w;
    const struct metrics *m = sw->m;
    /* the run's labels, then the name and the series' own in the room left */
    size_t n = m->nlabels;
    m->names[n] = "__name__";
    m->values[n++] = name;
    if (label) {
        m->names[n] = label;
        m->values[n++] = value;
    }
    remote_write_series(sw->out, m->names, m->values, n, v, sw->ts_ms);
}

static void push(struct metrics *m, int64_t ts_ms, bool final)
{
    struct buf req = {0};
    if (ts_ms <= m->last_ms) /* each push after the last, whatever the clock did */
        ts_ms = m->last_ms + 1;
    m->last_ms = ts_ms;
    struct series_writer sw = {{series_family, series_sample}, &req, m, ts_ms};
    families(&sw.w, m);
    remote_write_push(m->rw, &req, final);
    buf_free(&req);
}

/* ---- updates ---------------------------------------------------------------------- */

static double cpu_seconds(const struct timeval *from, const struct timeval *to)
{
    return (double)(to->tv_sec - from->tv_sec) + (double)(to->tv_usec - from->tv_usec) / 1e6;
}

/* The gauges and the CPU times, as of end_us into what is measured. A
 * counter never goes back, whatever a clock or a rounding did. */
static void read_gauges(struct metrics *m, uint64_t end_us, bool cpu_now)
{
    struct rusage now;
    struct server_times server;
    uint64_t open = 0;
    for (size_t i = 0; i < m->nworkers; i++)
        open += worker_open(m->workers[i]);
    m->connections = open;
    if (cpu_now) {
        getrusage(RUSAGE_SELF, &now);
        double cpu = cpu_seconds(&m->base.ru_utime, &now.ru_utime) +
                     cpu_seconds(&m->base.ru_stime, &now.ru_stime);
        m->client_cpu_s = cpu > m->client_cpu_s ? cpu : m->client_cpu_s;
    }
    if (m->has_server && timeline_server_cpu(m->timeline, &server))
        m->server_cpu_s = server.user_s + server.system_s;
    if (m->spec->rate)
        m->target_rate = profile_rate(&m->profile, (double)(m->spec->warmup_us + end_us)) *
                         spec_rate_share(m->spec);
}

/* The text /metrics serves from now on. */
static void publish(struct metrics *m)
{
    if (!m->scrape)
        return;
    metrics_text(m, &m->text);
    scrape_set_body(m->scrape, m->text.data, m->text.len);
}

void metrics_interval(struct metrics *m, const struct stats *s, uint64_t start_us,
                      uint64_t length_us)
{
    uint64_t end = start_us + length_us;
    stats_merge(&m->total, s);
    m->duration_s = (double)end / 1e6;
    read_gauges(m, end, true);
    publish(m);
    if (m->rw)
        push(m, m->started_ms + (int64_t)(end / 1000), false);
}

void metrics_final(struct metrics *m, const struct result *r)
{
    struct timespec now;
    stats_reset(&m->total);
    stats_merge(&m->total, &r->stats);
    m->duration_s = (double)r->runtime_us / 1e6;
    /* --json's CPU time: taken after every interval's (from a base taken
     * no later than this one's), so the counter still only grows */
    read_gauges(m, r->runtime_us, false);
    double cpu = r->cpu.user_s + r->cpu.system_s;
    m->client_cpu_s = cpu > m->client_cpu_s ? cpu : m->client_cpu_s;
    publish(m);
    clock_gettime(CLOCK_REALTIME, &now);
    m->final_us = clock_us();
    if (m->rw)
        push(m, (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, true);
}

/* ---- the run around it ---------------------------------------------------------- */

static int open_listener(const char *addr)
{
    char *host, *port;
    const char *why;
    if (!net_parse_listen(addr, &host, &port, &why))
        die("invalid --metrics-listen '%s': %s", addr, why);
    int fd = net_listen(host, port, &why);
    free(host);
    free(port);
    if (fd < 0)
        die("--metrics-listen %s: %s", addr, why);
    return fd;
}

struct metrics *metrics_new(const struct config *cfg)
{
    if (!cfg->metrics_listen && !cfg->remote_write)
        return NULL;
    struct metrics *m = xcalloc(1, sizeof *m);
    m->spec = &cfg->spec;
    m->bounds = cfg->spec.nbuckets ? cfg->spec.buckets : default_buckets;
    m->nbounds = cfg->spec.nbuckets ? cfg->spec.nbuckets
                                    : sizeof default_buckets / sizeof default_buckets[0];
    stats_init(&m->total);
    run_labels(m);
    if (cfg->spec.rate)
        spec_profile(&cfg->spec, &m->profile);
    if (cfg->metrics_listen) {
        m->listen = xstrdup(cfg->metrics_listen);
        m->scrape = scrape_new(open_listener(cfg->metrics_listen));
    }
    if (cfg->remote_write)
        m->rw = remote_write_new(cfg->remote_write, cfg->remote_write_strict);
    m->strict = cfg->remote_write_strict;
    m->linger_us = cfg->metrics_linger_us;
    return m;
}

void metrics_attach(struct metrics *m, struct ev_loop *loop, struct worker **workers,
                    size_t nworkers, const struct timeline *timeline)
{
    m->loop = loop;
    m->workers = workers;
    m->nworkers = nworkers;
    m->timeline = timeline;
    struct server_times none;
    m->has_server = timeline && timeline_server_cpu(timeline, &none); /* 0 until measured */
    if (m->scrape)
        scrape_start(m->scrape, loop);
    if (m->rw)
        remote_write_start(m->rw, loop);
    publish(m);
}

void metrics_start(struct metrics *m, const struct timespec *started)
{
    getrusage(RUSAGE_SELF, &m->base);
    m->started_ms = (int64_t)started->tv_sec * 1000 + started->tv_nsec / 1000000;
}

/* ---- after the run ------------------------------------------------------------ */

/* How often the wait after the run looks whether remote write is done. */
#define FINISH_POLL 0.05

struct finish {
    struct metrics *m;
    uint64_t flush_until, linger_until; /* clock_us */
    ev_timer poll;
    ev_signal sigint, sigterm;
};

static bool finished(const struct finish *f)
{
    uint64_t now = clock_us();
    bool flushed = !f->m->rw || remote_write_idle(f->m->rw) || now >= f->flush_until;
    return flushed && now >= f->linger_until;
}

static void on_finish_poll(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    if (finished(t->data))
        ev_break(loop, EVBREAK_ALL);
}

/* Ctrl-C ends the wait, not volley: the report is out, and --json is
 * written after it. */
static void on_finish_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    (void)s, (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

/* Serves scrapes and lets remote write deliver until both are done. */
static void wait_out(struct metrics *m)
{
    uint64_t now = clock_us();
    struct finish f = {.m = m, .linger_until = m->final_us + m->linger_us};
    f.flush_until =
        m->final_us + (m->linger_us > METRICS_FLUSH_US ? m->linger_us : METRICS_FLUSH_US);
    if (finished(&f) || now >= f.flush_until)
        return;
    ev_timer_init(&f.poll, on_finish_poll, FINISH_POLL, FINISH_POLL);
    f.poll.data = &f;
    ev_signal_init(&f.sigint, on_finish_signal, SIGINT);
    ev_signal_init(&f.sigterm, on_finish_signal, SIGTERM);
    ev_timer_start(m->loop, &f.poll);
    ev_signal_start(m->loop, &f.sigint);
    ev_signal_start(m->loop, &f.sigterm);
    ev_run(m->loop, 0);
    ev_timer_stop(m->loop, &f.poll);
    ev_signal_stop(m->loop, &f.sigint);
    ev_signal_stop(m->loop, &f.sigterm);
}

bool metrics_finish(struct metrics *m)
{
    if (!m)
        return true;
    wait_out(m);
    if (!m->rw)
        return true;
    remote_write_stop(m->rw);
    struct remote_write_counts c;
    remote_write_counts(m->rw, &c);
    uint64_t lost = c.pushes - c.delivered;
    if (!lost)
        return true;
    fprintf(stderr,
            "%s: remote write to %s: %" PRIu64 " of %" PRIu64 " pushes not delivered (%" PRIu64
            " dropped, %" PRIu64 " rejected)%s%s\n",
            m->strict ? "volley" : "Warning", remote_write_url(m->rw), lost, c.pushes, c.dropped,
            c.rejected, c.last_error ? "; last error: " : "", c.last_error ? c.last_error : "");
    return !m->strict;
}

void metrics_json(struct json *j, const struct metrics *m)
{
    if (!m) {
        json_null(j, "telemetry");
        return;
    }
    json_object_begin(j, "telemetry");
    json_string(j, "metrics_listen", m->listen);
    if (m->scrape)
        json_uint(j, "scrapes", scrape_count(m->scrape));
    else
        json_null(j, "scrapes");
    json_object_begin(j, "labels");
    for (size_t i = 0; i < m->spec->nlabels; i++)
        json_string(j, m->spec->labels[i].name, m->spec->labels[i].value);
    json_object_end(j);
    if (m->rw) {
        struct remote_write_counts c;
        remote_write_counts(m->rw, &c);
        json_object_begin(j, "remote_write");
        json_string(j, "url", remote_write_url(m->rw));
        json_uint(j, "pushes", c.pushes);
        json_uint(j, "delivered", c.delivered);
        json_uint(j, "dropped", c.dropped);
        json_uint(j, "rejected", c.rejected);
        json_uint(j, "failed_attempts", c.failed_attempts);
        json_string(j, "last_error", c.last_error);
        json_object_end(j);
    } else {
        json_null(j, "remote_write");
    }
    json_object_end(j);
}

void metrics_free(struct metrics *m)
{
    if (!m)
        return;
    scrape_free(m->scrape);
    remote_write_free(m->rw);
    buf_free(&m->text);
    stats_free(&m->total);
    profile_free(&m->profile);
    free(m->listen);
    free(m->names);
    free(m->values);
    free(m);
}
