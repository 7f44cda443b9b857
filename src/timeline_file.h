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
    FILE *hlog;         /* --hdr-log */
    const char *failed; /* the first file a write to failed */
    int failed_errno;
};

/* Opens the files spec names ("-": standard output, and descriptor 1
 * becomes standard error); dies with a one-line message when one cannot
 * be opened. */
void timeline_files_open(struct timeline_files *f, const struct run_spec *spec);
/* The first lines: the run's parameters; the run started at started (wall
 * clock), its intervals at origin_us (Unix time in us). */
void timeline_files_header(struct timeline_files *f, const struct timespec *started,
                           int64_t origin_us);
void timeline_files_write(struct timeline_files *f, const struct timeline_record *r);
/* Closes them; a failure is noted as a write's is. */
void timeline_files_close(struct timeline_files *f);

#endif
