/* The text report, line for line as wrk prints it (wrk-spec §2).
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_REPORT_H
#define VOLLEY_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "run_end.h"
#include "stats.h"

struct metrics;
struct run_spec;
struct threshold_abort;
struct threshold_verdict;
struct timeline;

/* One of the results volley merge added up, as the merged document lists it. */
struct result_input {
    const char *file;
    const char *timeline; /* the timeline merged with it, or NULL */
    int64_t start_us;     /* wall-clock start, Unix time in us */
    uint64_t duration_us, requests;
    bool sharded;
    uint64_t shard; /* its index, when sharded */
};

/* --bind: what the connections did from one source address. */
struct result_source {
    char address[46];  /* as inet_ntop writes it */
    uint64_t connects; /* connections established from it */
    uint64_t errors;   /* attempts from it that failed to connect */
};

/* What a finished run measured. */
struct result {
    const struct run_spec *spec; /* what the run asked for */
    uint64_t runtime_us;
    struct stats stats;      /* all workers merged */
    size_t pipeline;         /* requests per batch */
    struct timespec started; /* wall-clock start of the run, for the record */
    /* --start-at: how long after the instant the run started; a merge's is
     * its latest part's. Unknown without --start-at. */
    uint64_t start_late_us;
    bool start_late_known;
    struct {
        double user_s, system_s; /* the whole process during the run */
        double wait_s;           /* worker threads runnable but waiting for a CPU */
        bool has_wait;           /* wait_s is known (Linux) */
        double busiest;          /* highest share of its run a worker thread was busy */
        long cpus;               /* CPUs the run had; 0: those this process may use */
    } cpu;
    /* volley merge: the distributions some part lacks (bit i for
     * stats_dists[i]; a result of an earlier version), which the whole has
     * none of. A run measures every one, those of -R only with it. */
    uint32_t missing;
    /* With -R: the requests/sec asked of this process over the part of the
     * run that ran (its share of -R, or of --stages' profile); 0 without. */
    double rate_target;
    const struct timeline *timeline; /* intervals and server CPU, or NULL */
    const struct metrics *metrics;   /* live metrics, or NULL */
    /* --warmup: what it recorded, left out of everything above; or NULL */
    const struct stats *warmup;
    /* --threshold: each one's verdict (NULL without), and why the run was
     * stopped early (NULL if it was not) */
    const struct threshold_verdict *verdicts;
    size_t nverdicts;
    const struct threshold_abort *aborted;
    struct run_end end;
    /* --bind: each source address's connections (after any warm-up), in
     * the order of the list; NULL without */
    const struct result_source *sources;
    size_t nsources;
    /* volley merge: the results this one adds up; NULL for a run. */
    const struct result_input *inputs;
    size_t ninputs;
};

/* The generator's own load. A worker thread is busy while it is on a CPU or
 * runnable and waiting for one; when the busiest was busy for more than
 * REPORT_SATURATED of the run, its loop was rarely waiting for the network:
 * responses queued inside volley, that wait counted as latency, and the
 * throughput was volley's limit. */
#define REPORT_SATURATED 0.9
/* A run shorter than this (a quick -n) is mostly start-up and tear-down: how
 * busy its threads were says nothing about the load it made. */
#define REPORT_SATURATED_MIN_US 250000
struct cpu_load {
    long cpus;          /* CPUs this process may run on */
    double utilisation; /* process CPU time / (run time x threads) */
    bool saturated;
};
void report_cpu_load(const struct result *r, struct cpu_load *load);

/* --bind: past this many source addresses, the line after the report
 * gives their range rather than each one's count. */
#define REPORT_SOURCES_LISTED 16

/* "Running 10s test @ URL" and "  2 threads and 10 connections". */
void report_header(FILE *f, const struct run_spec *spec);
void report_text(FILE *f, const struct result *r);
/* Requests a connection had in flight at most: the pipeline depth, or over
 * HTTP/2 the streams -m asked for, capped by the server's SETTINGS. */
size_t report_inflight(const struct result *r);
/* After the text report: with HTTP/2, a line when the server allowed fewer
 * streams than -m asked for; a warning line when the generator was saturated,
 * and with -R one when fewer requests went out than asked for, saying why
 * (too few connections for the server's response time, errors, or the
 * generator itself). */
void report_warnings(FILE *f, const struct result *r);
/* The whole result as one JSON document (docs/json.md); false if writing failed. */
bool report_json(FILE *f, const struct result *r);

/* One stat cell: s right-aligned and truncated so that decimal points line
 * up whatever the unit's length (wrk's print_units). */
void report_cell(FILE *f, const char *s, int width);

#endif
