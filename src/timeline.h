/* Results over time: main's side of the intervals. It takes each interval
 * once every worker has delivered it, writes it to --timeline (JSON Lines
 * or CSV) and --hdr-log, samples the server's CPU time (--server-pid), keeps
 * the last interval for the progress line and a summary for --json.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_TIMELINE_H
#define VOLLEY_TIMELINE_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "server_cpu.h"

struct config;
struct intervals;
struct json;

/* Opens the output files and finds the server's processes, so that a bad
 * path or PID is an error before the run starts (dies with a one-line
 * message). */
struct timeline *timeline_new(const struct config *cfg);
void timeline_free(struct timeline *t);

/* Before the workers start: the hand-off through which the intervals of
 * nworkers workers arrive, to be written from loop. */
struct intervals *timeline_attach(struct timeline *t, struct ev_loop *loop, size_t nworkers);
/* The run starts at start (clock_us) and started (wall clock). */
void timeline_start(struct timeline *t, uint64_t start, const struct timespec *started);
/* After the workers are joined: writes the intervals left, the last one
 * ending at runtime_us, and closes the files. */
void timeline_finish(struct timeline *t, uint64_t runtime_us);
/* After the report: dies with a one-line message if writing a file failed. */
void timeline_check(const struct timeline *t);

/* The last interval written: its requests per second and, when it had a
 * response, its 99th percentile latency (us). False before the first. */
bool timeline_last(const struct timeline *t, double *rate, uint64_t *p99, bool *has_p99);

/* --server-pid: the server's CPU time over the run; false without it. */
bool timeline_server_cpu(const struct timeline *t, struct server_times *cpu);

/* The "intervals" and "server" members of the --json document. */
void timeline_json(struct json *j, const struct timeline *t, uint64_t requests);

#endif
