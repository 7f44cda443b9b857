/* Results over time: main's side of the intervals. It takes each interval
 * once every worker has delivered it, writes it to --timeline (JSON Lines
 * or CSV) and --hdr-log, samples the server's CPU time (--server-pid), keeps
 * the last interval for the progress line and a summary for --json. volley
 * merge writes the merged intervals through it too, so that they have the
 * format of a run's own.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_TIMELINE_H
#define VOLLEY_TIMELINE_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "server_cpu.h"
#include "stats.h"

struct run_spec;
struct intervals;
struct json;
struct run_end;
struct stats;

/* Opens the output files spec names and finds the server's processes
 * (--server-pid), so that a bad path or PID is an error before the run
 * starts (dies with a one-line message). The files are not truncated yet
 * (see timeline_begin). */
struct timeline *timeline_new(const struct run_spec *spec, char *const *server_pids,
                              size_t nserver_pids);
void timeline_free(struct timeline *t);

/* Before the workers start: the hand-off through which the intervals of
 * nworkers workers arrive, to be written from loop. */
struct intervals *timeline_attach(struct timeline *t, struct ev_loop *loop, size_t nworkers);
/* fn is called with each interval as it is written, on main's thread:
 * its statistics, its index, and its start and length in us from the
 * start of the run. */
void timeline_on_interval(struct timeline *t,
                          void (*fn)(void *arg, const struct stats *s, uint64_t index,
                                     uint64_t start_us, uint64_t length_us),
                          void *arg);
/* The run starts at started (wall clock); its intervals count from start
 * (clock_us), which is earlier with -R and --start-at when the process woke
 * late, and later by a --warmup. */
void timeline_start(struct timeline *t, uint64_t start, const struct timespec *started);
/* What is measured starts (after any warm-up): the files are truncated and
 * get their first lines, and the server's CPU time counts from here. Once;
 * the first interval written begins them if nothing did before. */
void timeline_begin(struct timeline *t);
/* After the workers are joined: writes the intervals left, the last one
 * ending at runtime_us, then the end record saying how the run ended (none
 * when end is NULL: the run failed), and closes the files. */
void timeline_finish(struct timeline *t, uint64_t runtime_us, const struct run_end *end);
/* Instead of timeline_finish, for a run that ended before what it measures
 * began: the files are left as they were before it (a file it made is
 * removed). */
void timeline_abandon(struct timeline *t);
/* The end record, after the last interval (timeline_finish writes it; volley
 * merge, before timeline_close): how the run ended, its duration, and the
 * intervals and responses written. */
void timeline_end(struct timeline *t, const struct run_end *end, uint64_t duration_us);

/* volley merge, instead of attaching and starting: the run started at
 * started, its intervals at origin_us (Unix time in us); then
 * timeline_add writes interval index (s, of length_us, with the server's
 * CPU time in it, NaN when not measured) as a run's own, and timeline_close
 * closes the files. */
void timeline_start_merged(struct timeline *t, const struct timespec *started, int64_t origin_us);
void timeline_add(struct timeline *t, const struct stats *s, uint64_t index, uint64_t length_us,
                  double server_s);
void timeline_close(struct timeline *t);
/* volley merge: the distributions the merged intervals have (bit i for
 * stats_dists[i]): those every part's timeline has. */
void timeline_set_measured(struct timeline *t, uint32_t measured);
/* volley merge: the server's CPU time over the run, as the parts measured it,
 * instead of measuring it (pids ascending). */
void timeline_set_server(struct timeline *t, const pid_t *pids, size_t n,
                         const struct server_times *cpu);
/* After the report: says in one line each file that could not be written
 * (output_failed: output_check then exits 1). */
void timeline_check(const struct timeline *t);

/* The last interval written: its requests per second and, when it had a
 * response, its 99th percentile latency (us). False before the first. */
bool timeline_last(const struct timeline *t, double *rate, uint64_t *p99, bool *has_p99);

/* --server-pid: the server's CPU time over the run; false without it. */
bool timeline_server_cpu(const struct timeline *t, struct server_times *cpu);

/* The "intervals" and "server" members of the --json document; intervals
 * is null when spec->interval_us is 0 (volley merge without timelines). */
void timeline_json(struct json *j, const struct timeline *t, uint64_t requests);

#endif
