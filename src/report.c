/* wrk's text report: the thread-stats table with its column rule, the
 * optional latency distribution, totals, error lines and rates.
 * SPDX-License-Identifier: MIT */
#include "report.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "h1.h"
#include "protocols.h"
#include "spec.h"
#include "timeline.h"
#include "units.h"

/* "  shard 1/4: 3 of 10 connections, 600 of 2000 requests/sec": what this
 * process runs of the whole. */
static void report_shard(FILE *f, const struct run_spec *spec)
{
    const struct shard *s = &spec->shard;
    fprintf(f, "  shard %" PRIu64 "/%" PRIu64 ": %" PRIu64 " of %" PRIu64 " connections", s->index,
            s->count, s->connections, spec->connections);
    if (spec->rate)
        fprintf(f, ", %.10g of %" PRIu64 " requests/sec", s->rate, spec->rate);
    if (spec->requests)
        fprintf(f, ", %" PRIu64 " of %" PRIu64 " requests", s->requests, spec->requests);
    fputc('\n', f);
}

void report_header(FILE *f, const struct run_spec *spec)
{
    char d[UNITS_BUF];
    /* wrk's line, naming the protocols when they are not wrk's */
    char names[128], proto[160] = "";
    if (!spec_offers(spec, &proto_h1) || spec_protocol(spec) == NULL)
        snprintf(proto, sizeof proto, " over %s",
                 spec_protocols_text(spec, false, " or ", names, sizeof names));
    if (spec->requests && !spec->time_limit_us)
        fprintf(f, "Running %" PRIu64 " requests test @ %s%s\n", spec->requests, spec->url, proto);
    else if (!spec->time_limit_us) /* -d 0: until Ctrl-C */
        fprintf(f, "Running unlimited test @ %s%s\n", spec->url, proto);
    else
        fprintf(f, "Running %s test @ %s%s\n", units_duration(spec->duration_us, d), spec->url,
                proto);
    fprintf(f, "  %" PRIu64 " threads and %" PRIu64 " connections\n", spec->threads,
            spec->shard.connections);
    /* how the connections move their bytes (unknown for a merge of results
     * that did not say) */
    if (spec_engine_name(spec->engine))
        fprintf(f, "  engine: %s\n", spec_engine_name(spec->engine));
    if (spec->shard.count)
        report_shard(f, spec);
    if (spec->warmup_us)
        fprintf(f, "  %s warm-up first, left out of the results\n",
                units_duration(spec->warmup_us, d));
}

void report_cell(FILE *f, const char *s, int width)
{
    size_t len = strlen(s);
    int pad = 2;
    if (len >= 1 && isalpha((unsigned char)s[len - 1]))
        pad--;
    if (len >= 2 && isalpha((unsigned char)s[len - 2]))
        pad--;
    width -= pad;
    fprintf(f, "%*.*s%.*s", width, width, s, pad, "  ");
}

typedef char *(*formatter)(long double, char[UNITS_BUF]);

/* A row of the thread-stats table. wrk's own rows (Latency, Req/Sec) print
 * glibc's "-nan" for an empty histogram's 0/0, as wrk does; volley's (TTFB)
 * leave the field empty instead. */
static void stat_row(FILE *f, const char *name, const struct hist *h, formatter fmt, bool wrks)
{
    char buf[UNITS_BUF];
    double mean = hist_mean(h), stdev = hist_stdev(h);
    double within = hist_within_stdev(h, mean, stdev);
    fprintf(f, "    %-10s", name);
    report_cell(f, fmt(mean, buf), 8);
    report_cell(f, fmt(stdev, buf), 10);
    report_cell(f, fmt(hist_max(h), buf), 9);
    if (isnan(within) && !wrks)
        fputc('\n', f);
    else
        fprintf(f, "%8.2f%%\n", isnan(within) ? -NAN : within);
}

static void latency_distribution(FILE *f, const struct hist *h)
{
    static const double percentiles[] = {50, 75, 90, 99};
    char buf[UNITS_BUF];
    fprintf(f, "  Latency Distribution\n");
    for (size_t i = 0; i < sizeof percentiles / sizeof percentiles[0]; i++) {
        fprintf(f, "%7.0f%%", percentiles[i]);
        report_cell(f, units_time_us(hist_percentile(h, percentiles[i]), buf), 10);
        fputc('\n', f);
    }
}

/* wrk2's block (wrk-spec §6.6): eight percentiles, HdrHistogram's detailed
 * spectrum in milliseconds, and its footer. */
static void hdr_distribution(FILE *f, const char *title, const struct hist *h)
{
    static const double percentiles[] = {50, 75, 90, 99, 99.9, 99.99, 99.999, 100};
    char buf[UNITS_BUF];
    struct hist_iter it;
    fprintf(f, "  Latency Distribution (HdrHistogram - %s)\n", title);
    for (size_t i = 0; i < sizeof percentiles / sizeof percentiles[0]; i++) {
        fprintf(f, "%7.3f%%", percentiles[i]);
        report_cell(f, units_time_us(hist_value_at_percentile(h, percentiles[i]), buf), 10);
        fputc('\n', f);
    }
    fprintf(f, "\n  Detailed Percentile spectrum:\n");
    fprintf(f, "%12s %12s %12s %12s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
    hist_iter_init(&it, h, 5);
    while (hist_iter_next(&it)) {
        double fraction = it.percentile / 100;
        fprintf(f, "%12.3f %12f %12" PRIu64 " %12.2f\n", (double)it.value / 1000, fraction,
                it.cumulative, 1 / (1 - fraction));
    }
    fprintf(f, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", hist_mean(h) / 1000,
            hist_stdev(h) / 1000);
    fprintf(f, "#[Max     = %12.3f, Total count    = %12" PRIu64 "]\n", (double)hist_max(h) / 1000,
            hist_count(h));
    fprintf(f, "#[Buckets = %12d, SubBuckets     = %12d]\n", hist_bucket_count(h),
            hist_sub_bucket_count(h));
    fprintf(f, "----------------------------------------------------------\n");
}

/* --server-pid: "Server CPU: 3.21s, 41.2us/request". */
static void server_cpu_line(FILE *f, const struct result *r)
{
    struct server_times cpu;
    if (!r->timeline || !timeline_server_cpu(r->timeline, &cpu))
        return;
    double total = cpu.user_s + cpu.system_s;
    fprintf(f, "Server CPU: %.2fs", total);
    if (r->stats.requests)
        fprintf(f, ", %.1fus/request", total * 1e6 / (double)r->stats.requests);
    fputc('\n', f);
}

void report_text(FILE *f, const struct result *r)
{
    const struct stats *s = &r->stats;
    const struct errors *e = &s->errors;
    char t[UNITS_BUF], b[UNITS_BUF];
    long double seconds = (long double)r->runtime_us / 1e6L;

    fprintf(f, "  Thread Stats%6s%11s%8s%12s\n", "Avg", "Stdev", "Max", "+/- Stdev");
    stat_row(f, "Latency", s->latency, units_time_us, true);
    /* Every request has a connection of its own: its set-up, which latency
     * leaves out, is a figure of the run too (ab's "Connect"). */
    if (r->spec->no_keepalive)
        stat_row(f, "Connect", s->connect, units_time_us, false);
    stat_row(f, "Req/Sec", s->rps, units_metric, true);
    /* --latency: the time to first byte too, as the table's last row, so
     * that the Latency and Req/Sec rows and the distribution below stay
     * where wrk's parsers look for them; not for a merge of results that
     * have none. */
    if (r->spec->latency && !(r->missing & (1u << STATS_DIST_ttfb)))
        stat_row(f, "TTFB", s->ttfb, units_time_us, false);
    if (r->spec->latency && r->spec->rate)
        hdr_distribution(f, "Recorded Latency", s->latency);
    else if (r->spec->latency)
        latency_distribution(f, s->latency);
    if (r->spec->u_latency) {
        fputc('\n', f);
        hdr_distribution(f,
                         "Uncorrected Latency (measured without taking delayed starts into "
                         "account)",
                         s->u_latency);
    }
    fprintf(f, "  %" PRIu64 " requests in %s, %sB read\n", s->requests,
            units_time_us(r->runtime_us, t), units_binary(s->bytes, b));
    if (e->connect || e->read || e->write || e->timeout)
        fprintf(f,
                "  Socket errors: connect %" PRIu64 ", read %" PRIu64 ", write %" PRIu64
                ", timeout %" PRIu64 "\n",
                e->connect, e->read, e->write, e->timeout);
    if (e->status)
        fprintf(f, "  Non-2xx or 3xx responses: %" PRIu64 "\n", e->status);
    if (s->reopened)
        fprintf(f, "  Connections reopened: %" PRIu64 "\n", s->reopened);
    fprintf(f, "Requests/sec: %9.2Lf\n", seconds > 0 ? s->requests / seconds : 0);
    fprintf(f, "Transfer/sec: %10sB\n", units_binary(seconds > 0 ? s->bytes / seconds : 0, b));
    server_cpu_line(f, r);
}

/* With -R, when fewer requests went out than asked for: say so and why. */
static void rate_shortfall(FILE *f, const struct result *r)
{
    const struct run_spec *spec = r->spec;
    const struct stats *s = &r->stats;
    const struct errors *e = &s->errors;
    double seconds = (double)r->runtime_us / 1e6;
    /* a shard's own share of -R and -c, over what ran of the profile */
    double rate = r->rate_target;
    uint64_t connections = spec->shard.connections;
    if (!spec->rate || seconds <= 0)
        return;
    double sent = (double)s->sent / seconds;
    if (sent >= 0.98 * rate)
        return;
    fprintf(f, "Warning: sent %.2f requests/sec, short of the %.10g asked for: ", sent, rate);
    /* With d requests outstanding per connection (a pipelined batch, or
     * HTTP/2 streams), c connections at a mean response time of L, each
     * pausing P for delay() between batches, carry at most c d / (L + P)
     * requests a second. */
    double mean = hist_mean(s->u_latency) / 1e6;
    double pause = s->pauses ? (double)s->paused_us / (double)s->pauses / 1e6 : 0;
    double cycle = mean + pause;
    double depth = (double)report_inflight(r);
    double capacity = cycle > 0 ? (double)connections * depth / cycle : 0;
    uint64_t socket_errors = e->connect + e->read + e->write + e->timeout;
    char l[UNITS_BUF], p[UNITS_BUF];
    if (capacity > 0 && capacity < 1.02 * rate) {
        fprintf(f, "at a mean response time of %s", units_time_us(mean * 1e6, l));
        if (pause > 0)
            fprintf(f, " and a mean delay() pause of %s", units_time_us(pause * 1e6, p));
        fprintf(f,
                ", %" PRIu64 " connections carry at most %.0f requests/sec; raise -c to at "
                "least %.0f\n",
                connections, capacity, ceil(rate * cycle * 1.25 / depth));
    } else if (socket_errors)
        fprintf(f, "%" PRIu64 " socket errors kept connections from sending\n", socket_errors);
    else
        fprintf(f, "the load generator could not keep up (add threads, or check its CPU)\n");
}

/* CPUs this process may run on (taskset, cpusets), as nproc counts them. */
static long usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

void report_cpu_load(const struct result *r, struct cpu_load *load)
{
    double seconds = (double)r->runtime_us / 1e6;
    double cpu = r->cpu.user_s + r->cpu.system_s;
    load->cpus = r->cpu.cpus ? r->cpu.cpus : usable_cpus();
    load->utilisation = seconds > 0 ? cpu / seconds / (double)r->spec->threads : 0;
    load->saturated = r->cpu.busiest > REPORT_SATURATED && r->runtime_us >= REPORT_SATURATED_MIN_US;
}

/* HTTP/2 and HTTP/3: the streams a connection could open at once, -m
 * capped by the server's limit (the fewest any server allowed);
 * UINT64_MAX when no server said. */
static uint64_t streams_allowed(const struct result *r)
{
    uint64_t h2 = spec_offers_figures(r->spec, STATS_AT_HTTP2) ? r->stats.h2_streams : UINT64_MAX;
    uint64_t h3 = spec_offers_figures(r->spec, STATS_AT_HTTP3) ? r->stats.h3_streams : UINT64_MAX;
    return h2 < h3 ? h2 : h3;
}

size_t report_inflight(const struct result *r)
{
    uint64_t allowed = streams_allowed(r);
    bool streams = false;
    for (size_t i = 0; i < PROTOCOLS_COUNT; i++)
        streams |= r->stats.by_protocol[i] && protocols_all[i]->multiplexed;
    if (!streams)
        return r->pipeline;
    return (size_t)(allowed < r->spec->streams ? allowed : r->spec->streams);
}

/* -m asked for more streams than the server lets a connection open. */
static void streams_capped(FILE *f, const struct result *r)
{
    uint64_t allowed = streams_allowed(r);
    if (allowed < r->spec->streams)
        fprintf(f,
                "Note: the server allows %" PRIu64 " concurrent streams per connection: "
                "-m %" PRIu64 " ran as -m %" PRIu64 "\n",
                allowed, r->spec->streams, allowed);
}

/* HTTP/3: the causes of the socket errors (the text report has wrk's
 * classes only), and the packets QUIC lost and sent again. */
static void quic_events(FILE *f, const struct result *r)
{
    const struct stats *s = &r->stats;
    const char *sep = "";
    if (!spec_quic(r->spec))
        return;
    if (s->errors.connect + s->errors.read + s->errors.write + s->errors.timeout) {
        fputs("Note: HTTP/3 errors by cause:", f);
        for (int c = 0; c < CAUSE_COUNT; c++) {
            if (!s->causes[c])
                continue;
            fprintf(f, "%s %s %" PRIu64, sep, stats_cause_name((enum cause)c), s->causes[c]);
            sep = ",";
        }
        fputc('\n', f);
    }
    if (s->h3_lost)
        fprintf(f, "Note: QUIC declared %" PRIu64 " packets of requests lost and sent them again\n",
                s->h3_lost);
}

/* Connections that spoke different protocols (--alpn): how many each. */
static void protocol_mix(FILE *f, const struct result *r)
{
    const uint64_t *n = r->stats.by_protocol;
    size_t used = 0;
    for (size_t i = 0; i < PROTOCOLS_COUNT; i++)
        used += n[i] != 0;
    if (used < 2)
        return;
    const char *sep = "Protocols: ";
    for (size_t i = 0; i < PROTOCOLS_COUNT; i++) {
        if (!n[i])
            continue;
        fprintf(f, "%s%" PRIu64 " %sover %s", sep, n[i],
                *sep == 'P' ? (n[i] == 1 ? "connection " : "connections ") : "",
                protocols_all[i]->name);
        sep = ", ";
    }
    fputc('\n', f);
}

/* HTTP/2 and HTTP/3 (proto, whose figures are at place): the requests the
 * server refused unprocessed, and its GOAWAY frames. A refused request is
 * sent again, so only those refused too often are in the error lines. */
static void refusals(FILE *f, const struct result *r, const char *proto, enum stats_place place,
                     uint64_t goaways, uint64_t refused)
{
    uint64_t failed = r->stats.causes[CAUSE_REFUSED_STREAM];
    if (!spec_offers_figures(r->spec, place) || (!goaways && !refused))
        return;
    fprintf(f, "Note: %s: ", proto);
    if (goaways)
        fprintf(f, "the server sent %" PRIu64 " GOAWAY frame%s%s", goaways, goaways == 1 ? "" : "s",
                refused ? "; " : "");
    if (refused && !failed)
        fprintf(f, "%" PRIu64 " requests were refused unprocessed and sent again", refused);
    else if (refused)
        fprintf(f,
                "%" PRIu64 " requests were refused unprocessed: %" PRIu64 " sent again, %" PRIu64
                " refused too often (read errors)",
                refused, refused - failed, failed);
    fputc('\n', f);
}

/* Errors that ended no request (a connection that failed with nothing in
 * flight) are counted under their causes only: the error lines count the
 * requests that errors ended. */
static void errors_without_requests(FILE *f, const struct result *r)
{
    const struct stats *s = &r->stats;
    const struct errors *e = &s->errors;
    uint64_t causes = 0, ended = e->connect + e->read + e->write + e->timeout;
    for (int c = 0; c < CAUSE_COUNT; c++)
        causes += s->causes[c];
    if (causes > ended)
        fprintf(f,
                "Note: %" PRIu64 " connection errors ended no request (none was in flight): "
                "they are in --json's error_causes, not in Socket errors\n",
                causes - ended);
}

/* --bind: the connections each source address opened, one by one for a
 * few addresses, as a range for many. */
static void source_counts(FILE *f, const struct result *r)
{
    uint64_t least = UINT64_MAX, most = 0, failed = 0;
    if (!r->sources)
        return;
    for (size_t i = 0; i < r->nsources; i++) {
        const struct result_source *a = &r->sources[i];
        least = a->connects < least ? a->connects : least;
        most = a->connects > most ? a->connects : most;
        failed += a->errors;
    }
    fputs("Note: connections by source address:", f);
    if (r->nsources > REPORT_SOURCES_LISTED) {
        fprintf(f, " %zu addresses, %s to %s, %" PRIu64 " to %" PRIu64 " each", r->nsources,
                r->sources[0].address, r->sources[r->nsources - 1].address, least, most);
        if (failed)
            fprintf(f, "; %" PRIu64 " failed to connect", failed);
    }
    for (size_t i = 0; r->nsources <= REPORT_SOURCES_LISTED && i < r->nsources; i++) {
        const struct result_source *a = &r->sources[i];
        fprintf(f, "%s %s %" PRIu64, i ? "," : "", a->address, a->connects);
        if (a->errors)
            fprintf(f, " (%" PRIu64 " failed to connect)", a->errors);
    }
    fputc('\n', f);
}

/* Connections that found no source port or address, with what to do. */
static void source_errors(FILE *f, const struct result *r)
{
    uint64_t ports = r->stats.causes[CAUSE_NO_PORT],
             addresses = r->stats.causes[CAUSE_BIND_ADDRESS];
    if (ports)
        fprintf(f,
                "Note: %" PRIu64 " connection attempts found no free local port (no_free_port): "
                "add source addresses (--bind) or widen the port range (--bind-port-range)\n",
                ports);
    if (addresses)
        fprintf(f,
                "Note: %" PRIu64 " connection attempts could not bind their source address "
                "(bind_address): add it to one of this machine's interfaces\n",
                addresses);
}

/* Through a proxy: the connection attempts it failed, by cause, and the
 * statuses it answered CONNECTs with. */
static void proxy_errors(FILE *f, const struct result *r)
{
    const struct stats *s = &r->stats;
    const char *sep = "Note: through the proxy, connection attempts failed:";
    for (int c = CAUSE_PROXY_REFUSED; c <= CAUSE_SOCKS_ADDRESS_TYPE; c++) {
        if (!s->causes[c])
            continue;
        fprintf(f, "%s %s %" PRIu64, sep, stats_cause_name(c), s->causes[c]);
        sep = ",";
        const char *open = " (status";
        for (int code = 0; c == CAUSE_PROXY_STATUS && code < STATS_STATUS_MAX; code++) {
            if (s->proxy_status[code]) {
                fprintf(f, "%s %d: %" PRIu64, open, code, s->proxy_status[code]);
                open = ",";
            }
        }
        if (*open == ',')
            fputc(')', f);
    }
    if (*sep == ',')
        fputc('\n', f);
    /* an http URL's requests go to the proxy itself, which answers them
     * when it refuses */
    if (r->spec->proxy && s->status[407])
        fprintf(f,
                "Note: the proxy answered %" PRIu64 " requests with 407 Proxy Authentication "
                "Required: check the user name and password in --proxy\n",
                s->status[407]);
}

void report_warnings(FILE *f, const struct result *r)
{
    struct cpu_load load;
    source_counts(f, r);
    source_errors(f, r);
    proxy_errors(f, r);
    protocol_mix(f, r);
    streams_capped(f, r);
    refusals(f, r, "HTTP/2", STATS_AT_HTTP2, r->stats.h2_goaways, r->stats.h2_refused);
    refusals(f, r, "HTTP/3", STATS_AT_HTTP3, r->stats.h3_goaways, r->stats.h3_refused);
    errors_without_requests(f, r);
    quic_events(f, r);
    report_cpu_load(r, &load);
    if (load.saturated)
        fprintf(f,
                "Warning: volley was CPU-bound (a thread was busy %.0f%% of the time): "
                "these figures measure the load generator, not only the server\n",
                100 * r->cpu.busiest);
    rate_shortfall(f, r);
}
