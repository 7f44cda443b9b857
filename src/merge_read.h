/* volley merge's inputs, read strictly (they come from other machines):
 * each --json result into a part, each --timeline (JSON Lines) into a
 * series of intervals. merge.c checks that they make one run and adds them
 * up.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_MERGE_READ_H
#define VOLLEY_MERGE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jdoc.h"
#include "report.h"
#include "run_end.h"
#include "spec.h"
#include "stats.h"

/* An interval's distribution as its record gives it: the histogram (still
 * encoded, until it is added) and the exact figures beside it. */
struct slice_latency {
    uint64_t count, max;
    double mean;
    char *hdr;
};

/* One interval of a part's timeline: the counters of the table that have a
 * timeline column, and its distributions that have one. */
struct slice {
    uint64_t length_us;
    uint64_t counts[STATS_NCOUNTERS]; /* by the table's index */
    uint64_t status[6];               /* 1xx ... 5xx, and other */
    double server_s;                  /* NaN when not measured */
    struct slice_latency dists[STATS_NDISTS];
};

/* One result file, as far as merging needs it. */
struct part {
    const char *file;
    struct jdoc *doc;
    const struct jdoc *options;
    /* What it asked for (options), and in shard its share of it (the whole
     * run's when it is not a shard: shard.count 0). */
    struct run_spec spec;
    bool open_model, counted; /* -R, -n */
    uint64_t pipeline;
    int64_t start_us;
    uint64_t start_late_us; /* --start-at: how late it started, when known */
    bool start_late_known;
    uint64_t duration_us;
    uint64_t interval_us; /* 0: it knows no intervals (merged without timelines) */
    /* What it measured, as read: merge.c adds it into the whole at once and
     * frees it (NULL then), keeping its counts as one slice of the run, for
     * its timeline to add up to; doc and options are kept for the first
     * part only, which the others are compared with. So memory does not
     * grow with the parts' histograms. */
    struct stats *stats;
    struct slice totals;
    uint32_t measured; /* the distributions it has (bit i for stats_dists[i]) */
    struct {
        double user_s, system_s, wait_s, busiest;
        bool has_wait;
        uint64_t cpus;
    } cpu;
    struct {
        bool known; /* --server-pid */
        double user_s, system_s;
        pid_t *pids;
        size_t npids;
        bool chosen; /* its figures stand for its server's in the whole */
    } server;
    struct series *series;       /* its timeline, when timelines are merged */
    struct hist *warmup_connect; /* --warmup: the connect times in it, or NULL */
    struct run_end end;          /* how its run ended (a result without end: completed) */
    bool end_known;
    struct result_source *sources; /* --bind's, or NULL */
    size_t nsources;
};

/* A part's --timeline (JSON Lines): the run line, then its intervals. */
struct series {
    const char *file;
    char *url;
    int64_t start_us;  /* the run's, as its result's start_time_us */
    int64_t origin_us; /* when its interval 0 starts */
    struct shard shard;
    bool open_model;
    uint64_t interval_us;
    uint32_t measured; /* the distributions its records have, as a part's */
    struct slice *slices;
    size_t n, cap;
    struct part *part;  /* the result of its run */
    uint64_t offset;    /* the merged interval its first one goes into */
    struct run_end end; /* its end record's, when it has one (ended) */
    bool ended;
};

/* Everything given to merge, told apart. */
struct inputs {
    struct part *parts;
    size_t nparts;
    struct series *series;
    size_t nseries;
    bool *seen;                  /* for shards: which of them are there */
    struct stats whole;          /* the parts' statistics, added up as each is read */
    uint32_t missing;            /* the distributions some part lacks (a result's measured) */
    struct hist *warmup_connect; /* their warm-ups' connect times, or NULL */
    int64_t origin_us;           /* when merged interval 0 starts: the earliest part's */
};

/* Reads the file name ("-": standard input) into a new part or series of
 * in, whose arrays have room for it. Exits 1 with one line on anything that
 * is not a well-formed volley result or timeline. */
void merge_read_file(struct inputs *in, const char *name);

/* The histogram of an interval's latency, with the exact figures its
 * record gives beside it; where (file and line) is for the message when
 * they do not fit. */
struct hist *merge_read_latency(const char *where, const struct stats_dist *d,
                                const struct slice_latency *l);

/* "volley: FILE: what", and exit 1. */
void merge_bad(const char *file, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

#endif
