/* The timeline's files. A record is one walk over its columns (record()
 * below) that three writers follow: the JSON Lines record, the CSV row, and
 * the CSV header row, which names the same columns in the same order (a
 * nested JSON member is a CSV column with the names joined by "_"). Records
 * are flushed one by one, so that a file can be followed during the run.
 * SPDX-License-Identifier: MIT */
#include "timeline_file.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "output.h"
#include "run_end.h"
#include "spec.h"
#include "units.h"
#include "version.h"
#include "xalloc.h"

/* Opened before the run but not truncated (timeline_files_begin does it);
 * *created says there was no file. "-": the records take stdout to
 * themselves and descriptor 1 becomes stderr, so the text report goes
 * there, as with --json -. */
static FILE *open_output(const char *option, const char *path, bool *created)
{
    FILE *f;
    *created = false;
    if (strcmp(path, "-") != 0)
        return output_open(option, path, created);
    int fd = dup(STDOUT_FILENO);
    if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0 || !(f = fdopen(fd, "w")))
        die("cannot write to stdout: %s", strerror(errno));
    return f;
}

static bool is_csv(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && strcasecmp(path + n - 4, ".csv") == 0;
}

void timeline_files_open(struct timeline_files *f, const struct run_spec *spec)
{
    memset(f, 0, sizeof *f);
    f->spec = spec;
    f->measured = stats_dists_measured(spec->rate != 0);
    if (spec->timeline) {
        f->out = open_output("--timeline", spec->timeline, &f->out_created);
        f->csv = is_csv(spec->timeline);
    }
    if (spec->hdr_log)
        f->hlog = open_output("--hdr-log", spec->hdr_log, &f->hlog_created);
}

/* Notes in *err why writing file first failed. */
static void check(FILE *file, int *err)
{
    if ((fflush(file) != 0 || ferror(file)) && !*err)
        *err = errno ? errno : EIO;
}

static void close_output(FILE *file, int *err)
{
    if (file && fclose(file) != 0 && !*err)
        *err = errno ? errno : EIO;
}

void timeline_files_close(struct timeline_files *f)
{
    close_output(f->out, &f->out_errno);
    close_output(f->hlog, &f->hlog_errno);
    f->out = f->hlog = NULL;
}

void timeline_files_abandon(struct timeline_files *f)
{
    timeline_files_close(f);
    if (f->begun)
        return;
    if (f->out_created)
        unlink(f->spec->timeline);
    if (f->hlog_created)
        unlink(f->spec->hdr_log);
}

void timeline_files_check(const struct timeline_files *f)
{
    if (f->out_errno)
        output_failed("--timeline", f->spec->timeline, f->out_errno);
    if (f->hlog_errno)
        output_failed("--hdr-log", f->spec->hdr_log, f->hlog_errno);
}

/* ---- the columns of a record --------------------------------------------- */

/* One of the three writers of a record, and where it is in it. */
struct cols {
    enum { COLS_JSON, COLS_CSV, COLS_NAMES } mode;
    FILE *f;
    struct json j;
    const char *object; /* the nested object (CSV: the names' prefix), or NULL */
    bool first;         /* no CSV column written yet */
};

/* The CSV separator, and with names the column's name. */
static void csv_cell(struct cols *c, const char *name)
{
    if (!c->first)
        fputc(',', c->f);
    c->first = false;
    if (c->mode == COLS_NAMES)
        fprintf(c->f, "%s%s%s", c->object ? c->object : "", c->object ? "_" : "", name);
}

static void col_uint(struct cols *c, const char *name, uint64_t v)
{
    if (c->mode == COLS_JSON) {
        json_uint(&c->j, name, v);
        return;
    }
    csv_cell(c, name);
    if (c->mode == COLS_CSV)
        fprintf(c->f, "%" PRIu64, v);
}

/* A number; NaN is null (an empty CSV field). */
static void col_real(struct cols *c, const char *name, double v)
{
    if (c->mode == COLS_JSON) {
        json_double(&c->j, name, v);
        return;
    }
    csv_cell(c, name);
    if (c->mode == COLS_CSV && !isnan(v))
        fprintf(c->f, "%.3f", v);
}

static void col_bool(struct cols *c, const char *name, bool v)
{
    if (c->mode == COLS_JSON) {
        json_bool(&c->j, name, v);
        return;
    }
    csv_cell(c, name);
    if (c->mode == COLS_CSV)
        fprintf(c->f, "%d", v);
}

static void col_null(struct cols *c, const char *name)
{
    if (c->mode == COLS_JSON)
        json_null(&c->j, name);
    else
        csv_cell(c, name);
}

static void col_begin(struct cols *c, const char *name)
{
    if (c->mode == COLS_JSON)
        json_object_begin(&c->j, name);
    c->object = name;
}

static void col_end(struct cols *c)
{
    if (c->mode == COLS_JSON)
        json_object_end(&c->j);
    c->object = NULL;
}

/* A distribution's figures, and in JSON its histogram (encoded: h's
 * encoding, or NULL); all null when the run does not measure it. */
static void col_dist(struct cols *c, const char *name, const struct hist *h, bool measured,
                     const char *encoded)
{
    static const char *const keys[] = {"count", "mean", "p50", "p90", "p99", "max"};
    if (c->mode == COLS_NAMES || !h)
        measured = false; /* the names alone */
    if (!measured && c->mode == COLS_JSON) {
        json_null(&c->j, name);
        return;
    }
    uint64_t n = measured ? hist_count(h) : 0;
    col_begin(c, name);
    if (!measured) {
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            col_null(c, keys[i]);
        col_end(c);
        return;
    }
    col_uint(c, "count", n);
    if (n) {
        col_real(c, "mean", hist_mean(h));
        col_uint(c, "p50", hist_value_at_percentile(h, 50));
        col_uint(c, "p90", hist_value_at_percentile(h, 90));
        col_uint(c, "p99", hist_value_at_percentile(h, 99));
        col_uint(c, "max", hist_max(h));
    } else {
        for (size_t i = 1; i < sizeof keys / sizeof keys[0]; i++)
            col_null(c, keys[i]);
    }
    if (c->mode == COLS_JSON) {
        char *own = encoded ? NULL : hist_encode(h);
        json_string(&c->j, "hdr_histogram", encoded ? encoded : own);
        free(own);
    }
    col_end(c);
}

static double per_sec(uint64_t n, uint64_t us) { return us ? (double)n * 1e6 / (double)us : 0; }

static uint64_t status_class(const struct stats *s, int hundreds)
{
    uint64_t n = 0;
    for (int code = 100 * hundreds; code < 100 * (hundreds + 1); code++)
        n += s->status[code];
    return n;
}

/* Responses by class, and those with a status outside 100..599. */
static void col_status(struct cols *c, const struct stats *s)
{
    static const char *const class_names[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
    uint64_t other = s ? s->requests : 0;
    col_begin(c, "status");
    for (int k = 1; k <= 5; k++) {
        uint64_t n = s ? status_class(s, k) : 0;
        col_uint(c, class_names[k - 1], n);
        other -= n;
    }
    col_uint(c, "other", other);
    col_end(c);
}

/* The counters of the table with a timeline column at place: those of -R
 * (null without it) or the others. The error classes are in an errors
 * object, the others at the top level. */
static void col_counters(struct cols *c, const struct timeline_files *f,
                         const struct timeline_record *r, enum stats_place place, bool open)
{
    bool any = false;
    for (size_t i = 0; i < stats_ncounters; i++) {
        const struct stats_counter *k = &stats_counters[i];
        if (k->place != place || !k->column || !(k->flags & STATS_OPEN) != !open)
            continue;
        if (!any && place == STATS_AT_ERRORS)
            col_begin(c, "errors");
        any = true;
        uint64_t v = r->s ? stats_counter_get(r->s, k) : 0;
        if (open && !f->spec->rate)
            col_null(c, k->column);
        else if (k->flags & STATS_PER_SEC)
            col_real(c, k->column, per_sec(v, r->length_us));
        else
            col_uint(c, k->column, v);
        if (k->flags & STATS_TL_RATE) {
            char name[64];
            snprintf(name, sizeof name, "%s_per_sec", k->column);
            col_real(c, name, per_sec(v, r->length_us));
        }
    }
    if (any && place == STATS_AT_ERRORS)
        col_end(c);
}

/* The distributions of the table with a timeline column: those of -R or
 * the others. */
static void col_dists(struct cols *c, const struct timeline_files *f,
                      const struct timeline_record *r, bool open, const char *latency)
{
    for (size_t i = 0; i < stats_ndists; i++) {
        const struct stats_dist *d = &stats_dists[i];
        if (!d->column || !(d->flags & STATS_OPEN) != !open)
            continue;
        const struct hist *h = r->s ? stats_dist_get(r->s, d) : NULL;
        col_dist(c, d->column, h, f->measured & (1u << i),
                 h && h == (r->s ? r->s->latency : NULL) ? latency : NULL);
    }
}

/* The columns of a record, in order: where it is in the run, the counters
 * place by place (the status classes after the totals), the distributions,
 * then the figures of -R, and the server's CPU time. */
static void record(struct cols *c, const struct timeline_files *f, const struct timeline_record *r,
                   const char *latency)
{
    col_uint(c, "interval", r->index);
    col_uint(c, "start_us", r->start_us);
    col_uint(c, "length_us", r->length_us);
    col_bool(c, "short", r->length_us < f->spec->interval_us);
    for (enum stats_place p = STATS_AT_TOTALS; p < STATS_AT_NONE; p++) {
        col_counters(c, f, r, p, false);
        if (p == STATS_AT_TOTALS)
            col_status(c, r->s);
    }
    col_dists(c, f, r, false, latency);
    for (enum stats_place p = STATS_AT_TOTALS; p < STATS_AT_NONE; p++)
        col_counters(c, f, r, p, true);
    col_dists(c, f, r, true, latency);
    col_real(c, "server_cpu_s", r->server_s);
}

/* ---- headers ------------------------------------------------------------- */

static uint64_t unix_us(const struct timespec *t)
{
    return (uint64_t)t->tv_sec * 1000000 + (uint64_t)t->tv_nsec / 1000;
}

/* The run's parameters, as the first line of a JSON Lines timeline. */
static void json_run(struct timeline_files *f, const struct timespec *started, int64_t origin_us)
{
    const struct run_spec *spec = f->spec;
    char date[UNITS_BUF];
    struct json j;
    json_init_line(&j, f->out);
    json_object_begin(&j, NULL);
    json_string(&j, "type", "run");
    json_string(&j, "volley", VOLLEY_VERSION);
    json_string(&j, "start_time", units_utc_time(started, date));
    /* with the shard, what volley merge finds a timeline's result by */
    json_uint(&j, "start_time_us", unix_us(started));
    if (spec->shard.count) {
        json_object_begin(&j, "shard");
        json_uint(&j, "index", spec->shard.index);
        json_uint(&j, "count", spec->shard.count);
        json_object_end(&j);
    } else {
        json_null(&j, "shard");
    }
    json_string(&j, "url", spec->url);
    json_uint(&j, "threads", spec->threads);
    json_uint(&j, "connections", spec->connections);
    json_uint_or_null(&j, "duration_us", spec->time_limit_us);
    json_uint_or_null(&j, "requests", spec->requests);
    json_uint_or_null(&j, "rate", spec->rate);
    json_string(&j, "script", spec->script);
    json_uint(&j, "interval_us", spec->interval_us);
    json_uint(&j, "intervals_start_us", (uint64_t)origin_us);
    json_object_end(&j);
    json_finish(&j);
}

/* A value of the comment line, percent-encoded (RFC 3986 §2.1) where it
 * holds a byte that could end it or its CSV field: a space or a control
 * character, a byte outside ASCII, '%', ',' and '"'. A key=value reader
 * then splits the line at spaces, and a CSV reader sees one field. */
static void csv_value(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p >= 0x7f || *p == '%' || *p == ',' || *p == '"')
            fprintf(f, "%%%02X", *p);
        else
            fputc(*p, f);
    }
}

/* The run's parameters as key=value pairs on a comment line, the URL last;
 * then the header row. */
static void csv_header(struct timeline_files *f, const struct timespec *started, int64_t origin_us)
{
    const struct run_spec *spec = f->spec;
    char date[UNITS_BUF];
    FILE *out = f->out;
    fprintf(out,
            "# volley %s timeline: start_time=%s start_time_us=%" PRIu64 " shard=", VOLLEY_VERSION,
            units_utc_time(started, date), unix_us(started));
    if (spec->shard.count)
        fprintf(out, "%" PRIu64 "/%" PRIu64, spec->shard.index, spec->shard.count);
    fprintf(out, " threads=%" PRIu64 " connections=%" PRIu64, spec->threads, spec->connections);
    fprintf(out, " duration_us=");
    if (spec->time_limit_us)
        fprintf(out, "%" PRIu64, spec->time_limit_us);
    fprintf(out, " requests=");
    if (spec->requests)
        fprintf(out, "%" PRIu64, spec->requests);
    fprintf(out, " rate=");
    if (spec->rate)
        fprintf(out, "%" PRIu64, spec->rate);
    fprintf(out,
            " interval_us=%" PRIu64 " intervals_start_us=%" PRId64 " script=", spec->interval_us,
            origin_us);
    csv_value(out, spec->script ? spec->script : "");
    fputs(" url=", out);
    csv_value(out, spec->url);
    fputc('\n', out);
    struct cols names = {.mode = COLS_NAMES, .f = out, .first = true};
    struct timeline_record none = {.server_s = NAN};
    record(&names, f, &none, NULL);
    fputc('\n', out);
}

/* HdrHistogram's interval log (format 1.3, as its Java HistogramLogWriter
 * writes it): start and base time, then per interval its start relative to
 * the base time and its length in seconds, its largest value in ms (what
 * the tools read in that column) and the histogram, in microseconds. */
static void hlog_header(struct timeline_files *f, const struct timespec *started, int64_t origin_us)
{
    char date[UNITS_BUF];
    double start = (double)started->tv_sec + (double)started->tv_nsec / 1e9;
    FILE *out = f->hlog;
    fprintf(out, "#[Histogram log format version 1.3]\n");
    fprintf(out, "#[StartTime: %.3f (seconds since epoch), %s]\n", start,
            units_utc_time(started, date));
    /* the intervals' starts are relative to where they count from */
    fprintf(out, "#[BaseTime: %.3f (seconds since epoch)]\n", (double)origin_us / 1e6);
    fprintf(out, "#[volley %s: latency of %s in microseconds; Interval_Max in milliseconds]\n",
            VOLLEY_VERSION, f->spec->url);
    fprintf(out, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
                 "\"Interval_Compressed_Histogram\"\n");
}

/* A file written from its start: what it held before goes now. */
static void truncate_output(FILE *file, int *err)
{
    struct stat st;
    if (file && fstat(fileno(file), &st) == 0 && S_ISREG(st.st_mode) &&
        ftruncate(fileno(file), 0) != 0 && !*err)
        *err = errno;
}

void timeline_files_begin(struct timeline_files *f, const struct timespec *started,
                          int64_t origin_us)
{
    if (f->begun)
        return;
    f->begun = true;
    truncate_output(f->out, &f->out_errno);
    truncate_output(f->hlog, &f->hlog_errno);
    if (f->out) {
        if (f->csv)
            csv_header(f, started, origin_us);
        else
            json_run(f, started, origin_us);
        check(f->out, &f->out_errno);
    }
    if (f->hlog) {
        hlog_header(f, started, origin_us);
        check(f->hlog, &f->hlog_errno);
    }
}

/* ---- records --------------------------------------------------------------- */

void timeline_files_write(struct timeline_files *f, const struct timeline_record *r)
{
    /* the latency histogram, encoded once for both files */
    char *latency = (f->out && !f->csv) || f->hlog ? hist_encode(r->s->latency) : NULL;
    if (f->out && f->csv) {
        struct cols row = {.mode = COLS_CSV, .f = f->out, .first = true};
        record(&row, f, r, NULL);
        fputc('\n', f->out);
    } else if (f->out) {
        struct cols line = {.mode = COLS_JSON};
        json_init_line(&line.j, f->out);
        json_object_begin(&line.j, NULL);
        json_string(&line.j, "type", "interval");
        record(&line, f, r, latency);
        json_object_end(&line.j);
        json_finish(&line.j);
    }
    if (f->out)
        check(f->out, &f->out_errno);
    if (f->hlog) {
        fprintf(f->hlog, "%.3f,%.3f,%.3f,%s\n", (double)r->start_us / 1e6,
                (double)r->length_us / 1e6, (double)hist_max(r->s->latency) / 1e3, latency);
        check(f->hlog, &f->hlog_errno);
    }
    free(latency);
    f->count++;
    f->requests += r->s->requests;
}

void timeline_files_end(struct timeline_files *f, const struct run_end *end, uint64_t duration_us)
{
    const char *sig = end->reason == END_INTERRUPTED ? run_end_signal_name(end->signal) : NULL;
    char status[16] = "";
    if (end->reason == END_SCRIPT_EXIT)
        snprintf(status, sizeof status, "%u", (unsigned)end->status & 0xff);
    if (f->out && f->csv) {
        fprintf(f->out,
                "# end: reason=%s signal=%s exit_status=%s duration_us=%" PRIu64
                " intervals=%" PRIu64 " requests=%" PRIu64 "\n",
                run_end_name(end->reason), sig ? sig : "", status, duration_us, f->count,
                f->requests);
    } else if (f->out) {
        struct json j;
        json_init_line(&j, f->out);
        json_object_begin(&j, NULL);
        json_string(&j, "type", "end");
        run_end_json(&j, end);
        json_uint(&j, "duration_us", duration_us);
        json_uint(&j, "intervals", f->count);
        json_uint(&j, "requests", f->requests);
        json_object_end(&j);
        json_finish(&j);
    }
    if (f->out)
        check(f->out, &f->out_errno);
    if (f->hlog) {
        fprintf(f->hlog,
                "#[volley end: reason=%s signal=%s exit_status=%s duration_us=%" PRIu64
                " intervals=%" PRIu64 "]\n",
                run_end_name(end->reason), sig ? sig : "", status, duration_us, f->count);
        check(f->hlog, &f->hlog_errno);
    }
}
