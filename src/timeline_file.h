/* The timeline's files: each interval as a JSON Lines record or a CSV row
 * (--timeline), and its latency histogram in HdrHistogram's interval log
 * (--hdr-log). The columns of a record come from the table of figures
 * (stats.h), one walk for both formats, so they cannot drift apart.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_TIMELINE_FILE_H
#define VOLLEY_TIMELINE_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "stats.h"

struct run_end;
struct run_spec;

/* One interval as written. */
struct timeline_record {
    uint64_t index, start_us, length_us;
    const struct stats *s;
    double server_s; /* CPU time of the server in it; NaN without --server-pid */
};

struct timeline_files {
    const struct run_spec *spec;
    uint32_t measured; /* the distributions written (bit i for stats_dists[i]) */
    FILE *out;         /* --timeline */
    bool csv;
    FILE *hlog;     /* --hdr-log */
    int out_errno;  /* why writing --timeline first failed, or 0: said after the report */
    int hlog_errno; /* the same for --hdr-log */
    /* each file was made by this run (there was none before), and the
     * files have been truncated and their first lines written */
    bool out_created, hlog_created, begun;
    uint64_t count, requests; /* the intervals written, and the responses in them */
};

/* Opens the files spec names ("-": standard output, and descriptor 1
 * becomes standard error); dies with a one-line message when one cannot
 * be opened. They are not truncated yet: that waits for the start of what
 * is measured (timeline_files_begin), so that a run interrupted before it
 * leaves an earlier file as it was. */
void timeline_files_open(struct timeline_files *f, const struct run_spec *spec);
/* Once, when what is measured starts: truncates the files and writes the
 * first lines, the run's parameters; the run started at started (wall
 * clock), its intervals at origin_us (Unix time in us). */
void timeline_files_begin(struct timeline_files *f, const struct timespec *started,
                          int64_t origin_us);
void timeline_files_write(struct timeline_files *f, const struct timeline_record *r);
/* The last record: how the run ended, its duration, and the intervals and
 * responses written. A file without it was cut short (the process was
 * killed, or is still running). */
void timeline_files_end(struct timeline_files *f, const struct run_end *end, uint64_t duration_us);
/* Closes them; a failure is noted as a write's is. */
void timeline_files_close(struct timeline_files *f);
/* Instead of closing them after a run that ended before what it measures
 * began: a file this run made is removed (one there before was left as it
 * was, never truncated). */
void timeline_files_abandon(struct timeline_files *f);
/* Says in one line each file that could not be written (output_failed). */
void timeline_files_check(const struct timeline_files *f);

#endif
