/* Writing the results: standard output checked for errors, and --json FILE
 * replaced in one step after the run.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_OUTPUT_H
#define VOLLEY_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct result;

/* At start: descriptors 0-2 that are closed are taken (by /dev/null, read
 * only), so that no socket becomes stdout and writing the report fails. */
void output_reserve_stdio(void);
/* Flush stdout, noting why it failed if it did. */
void output_flush_stdout(void);
/* Flush stdout; exit 1 with a message if anything written to it failed
 * (unless --json - made it the JSON's, the report going to stderr). */
void output_check_stdout(void);

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
/* After the run: the document, written to a temporary file and renamed over
 * the target, or written in place; exit 1 if that fails. */
void output_json_write(struct output_json *o, const struct result *r);
/* Instead, when the run has no result (it failed, or ended before what it
 * measures began): nothing is written, an earlier file is left as it was. */
void output_json_abandon(struct output_json *o);

#endif
