/* The text report, line for line as wrk prints it (wrk-spec §2).
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_REPORT_H
#define VOLLEY_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "stats.h"

struct config;

/* What a finished run measured. */
struct result {
    const struct config *cfg;
    uint64_t runtime_us;
    struct stats stats;      /* all workers merged */
    size_t pipeline;         /* responses per request() batch (1 without a script) */
    struct timespec started; /* wall-clock start of the run, for the record */
    double cpu_user_s, cpu_system_s; /* volley's own CPU time during the run */
    /* With -R: latency from the actual send, and how late requests were sent
     * after their intended time; NULL in the closed model. */
    const struct hist *latency_uncorrected, *scheduling_lag;
};

/* The generator's own load: CPU seconds per second of run time, as a share
 * of the threads it ran (utilisation) and of the threads that could run at
 * once (min of -t and the CPUs available). Saturated when the latter passes
 * REPORT_SATURATED: the loops then rarely wait for the network, so queues
 * inside volley add to the latency and cap the throughput it reports. */
#define REPORT_SATURATED 0.9
struct cpu_load {
    long cpus;          /* CPUs this process may run on */
    double usable;      /* min(threads, cpus) */
    double utilisation; /* CPU time / (run time x threads) */
    double saturation;  /* CPU time / (run time x usable) */
    bool saturated;
};
void report_cpu_load(const struct result *r, struct cpu_load *load);

/* "Running 10s test @ URL" and "  2 threads and 10 connections". */
void report_header(FILE *f, const struct config *cfg);
void report_text(FILE *f, const struct result *r);
/* After the text report: a warning line when the generator was saturated. */
void report_warnings(FILE *f, const struct result *r);
/* The whole result as one JSON document (docs/json.md); false if writing failed. */
bool report_json(FILE *f, const struct result *r);

/* One stat cell: s right-aligned and truncated so that decimal points line
 * up whatever the unit's length (wrk's print_units). */
void report_cell(FILE *f, const char *s, int width);

#endif
