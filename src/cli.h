/* The command line: the only place that knows option spellings. Produces a
 * read-only struct config, or exits with a one-line error.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CLI_H
#define VOLLEY_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct threshold;

/* Parses argv; prints usage and exits 0 for -h, prints the version and exits 0
 * for -v, prints "volley: <what is wrong>" (then a pointer to --help) and
 * exits 1 on bad input. */
void cli_parse(int argc, char **argv, struct config *cfg);
void cli_free(struct config *cfg);

/* volley merge FILE...: the results to merge and what to write. */
struct merge_config {
    char **files; /* "-" is stdin */
    size_t nfiles;
    char *json;     /* --json OUT, "-" for stdout */
    char *timeline; /* --timeline OUT: the merged intervals */
    char *hdr_log;  /* --hdr-log OUT */
    bool latency;
    struct threshold *thresholds;
    size_t nthresholds;
};

/* argv starts at "merge"; exits as cli_parse does on -h and bad input. */
void cli_parse_merge(int argc, char **argv, struct merge_config *mc);
void cli_free_merge(struct merge_config *mc);

#endif
