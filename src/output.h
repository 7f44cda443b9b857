/* Writing the results: standard output checked for errors, and --json FILE
 * replaced in one step after the run.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_OUTPUT_H
#define VOLLEY_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

struct result;

/* At start: descriptors 0-2 that are closed are taken (by /dev/null, read
 * only), so that no socket becomes stdout and writing the report fails. */
void output_reserve_stdio(void);
/* Flush stdout, noting why it failed if it did. */
void output_flush_stdout(void);
/* After the run, and after the header: flush stdout, saying it in one line
 * if writing to it failed (unless --json - made it the JSON's, the report
 * going to stderr); exit 1 if that or any output file failed. */
void output_check(void);
/* An output that could not be written (option's path, "-" for stdout),
 * said in one line; output_check() then exits 1. */
void output_failed(const char *option, const char *path, int err);

/* A file written (an output: --json, --timeline, --hdr-log) or read (the
 * script, volley merge's inputs), as given. */
struct output_use {
    const char *option; /* "--json", "-s", or NULL (volley merge's inputs) */
    const char *path;   /* NULL when not given; "-" for stdout or stdin */
    const char *input;  /* NULL for an output; for a file read, what it is ("the script") */
};
/* Before anything is written: exits 1 with one line when two outputs name
 * one file (the same path, or through links the same device and inode, "-"
 * being stdout's), when an output is an input, or when an output is the
 * regular file standard output goes to while the report goes there too. */
void output_check_distinct(const struct output_use *uses, size_t n);
/* Opens path for writing in place (--timeline, --hdr-log, or --json to a
 * device or a pipe), without truncating it: the caller does that when what
 * it writes begins, so that a run stopped before leaves the file as it was;
 * *created says this open made the file. A FIFO without a reader is waited
 * for with a line saying so; a file that cannot be created names its
 * directory when that is why. Dies with one line naming option if it cannot. */
FILE *output_open(const char *option, const char *path, bool *created);

struct output_json {
    const char *path; /* as given: a file, or "-" for stdout */
    FILE *f;          /* stdout, a device or a pipe: written in place */
    char *target;     /* otherwise the file replaced after the run */
    bool keep_mode;   /* target exists: the new file gets its mode */
    mode_t mode;
};

/* Before the run: check that path can be written (exit 1 if not), without
 * changing it. */
void output_json_open(struct output_json *o, const char *path);
/* After the run: the document write(f, r) writes (report_json), to a
 * temporary file renamed over the target, or in place; a failure is said
 * (output_failed), the target left as it was. The writer is given, not
 * called by name, so that writing the outputs depends on no report. */
void output_json_write(struct output_json *o, bool (*write)(FILE *f, const struct result *r),
                       const struct result *r);
/* Instead, when the run has no result (it failed, or ended before what it
 * measures began): nothing is written, an earlier file is left as it was. */
void output_json_abandon(struct output_json *o);

#endif
