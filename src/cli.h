/* The command line: the only place that knows option spellings. Produces a
 * read-only struct config, or exits with a one-line error.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CLI_H
#define VOLLEY_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy.h"
#include "sources.h"
#include "spec.h"
#include "url.h"

struct threshold;

/* The command line: the run it describes, and what only this process uses
 * (TLS files, where to write, how to start). */
struct config {
    struct run_spec spec;
    bool threads_set;  /* -t given (otherwise threads is at most connections) */
    bool duration_set; /* -d given (with -n, no -d means no time limit) */
    struct url url;    /* spec.url parsed */

    /* Pass/fail: --threshold, each parsed; --abort-on-fail after abort_after
     * failing intervals in a row (0 without it). */
    struct threshold *thresholds;
    size_t nthresholds;
    uint64_t abort_after;

    /* --http2 or --alpn LIST as given, for messages; NULL without them */
    char *protocol_option;

    /* How connections reach the target: --proxy (or --proxy-env), kind
     * PROXY_NONE without; --bind and --bind-port-range, none listed and no
     * range without. */
    struct proxy proxy;
    struct sources sources;

    /* TLS. */
    char *sni;   /* server name to send instead of the URL's host */
    bool verify; /* verify the server certificate */
    char *cacert, *cert, *key;

    /* Output. */
    char *json;         /* --json FILE, "-" for stdout */
    bool progress;      /* live progress line when stderr is a terminal */
    char **server_pids; /* --server-pid, as given: PIDs or process names */
    size_t nserver_pids;

    /* --start-at */
    char *start_at;      /* as given, or NULL */
    int64_t start_at_us; /* the same instant, Unix time in us */
};

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
