/* wrk's text report: the thread-stats table with its column rule, the
 * optional latency distribution, totals, error lines and rates.
 * SPDX-License-Identifier: MIT */
#include "report.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "units.h"

void report_header(FILE *f, const struct config *cfg)
{
    char d[UNITS_BUF];
    fprintf(f, "Running %s test @ %s\n", units_duration(cfg->duration_us, d), cfg->url_arg);
    fprintf(f, "  %" PRIu64 " threads and %" PRIu64 " connections\n", cfg->threads,
            cfg->connections);
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

static void stat_row(FILE *f, const char *name, const struct hist *h, formatter fmt)
{
    char buf[UNITS_BUF];
    double mean = hist_mean(h), stdev = hist_stdev(h);
    double within = hist_within_stdev(h, mean, stdev);
    fprintf(f, "    %-10s", name);
    report_cell(f, fmt(mean, buf), 8);
    report_cell(f, fmt(stdev, buf), 10);
    report_cell(f, fmt(hist_max(h), buf), 9);
    /* An empty histogram prints glibc's "-nan" for 0/0, as wrk does. */
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

void report_text(FILE *f, const struct result *r)
{
    const struct stats *s = &r->stats;
    const struct errors *e = &s->errors;
    char t[UNITS_BUF], b[UNITS_BUF];
    long double seconds = (long double)r->runtime_us / 1e6L;

    fprintf(f, "  Thread Stats%6s%11s%8s%12s\n", "Avg", "Stdev", "Max", "+/- Stdev");
    stat_row(f, "Latency", s->latency, units_time_us);
    stat_row(f, "Req/Sec", s->rps, units_metric);
    if (r->cfg->latency)
        latency_distribution(f, s->latency);
    fprintf(f, "  %" PRIu64 " requests in %s, %sB read\n", s->requests,
            units_time_us(r->runtime_us, t), units_binary(s->bytes, b));
    if (e->connect || e->read || e->write || e->timeout)
        fprintf(f, "  Socket errors: connect %" PRIu64 ", read %" PRIu64 ", write %" PRIu64
                   ", timeout %" PRIu64 "\n",
                e->connect, e->read, e->write, e->timeout);
    if (e->status)
        fprintf(f, "  Non-2xx or 3xx responses: %" PRIu64 "\n", e->status);
    fprintf(f, "Requests/sec: %9.2Lf\n", seconds > 0 ? s->requests / seconds : 0);
    fprintf(f, "Transfer/sec: %10sB\n", units_binary(seconds > 0 ? s->bytes / seconds : 0, b));
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
    load->cpus = usable_cpus();
    load->utilisation = seconds > 0 ? cpu / seconds / (double)r->cfg->threads : 0;
    load->saturated = r->cpu.busiest > REPORT_SATURATED;
}

void report_warnings(FILE *f, const struct result *r)
{
    struct cpu_load load;
    report_cpu_load(r, &load);
    if (load.saturated)
        fprintf(f, "Warning: volley was CPU-bound (a thread was busy %.0f%% of the time): "
                   "these figures measure the load generator, not only the server\n",
                100 * r->cpu.busiest);
}
