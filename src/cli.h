/* The command line: the only place that knows option spellings. Produces a
 * read-only struct config, or exits with a one-line error.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CLI_H
#define VOLLEY_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "url.h"

/* The shortest --interval. */
#define CLI_INTERVAL_MIN_US 10000

struct threshold;

/* One stage of --stages: the rate ramps to rate over duration_us. */
struct stage {
    uint64_t duration_us;
    uint64_t rate;
};

struct header {
    char *name;
    char *value;
};

/* This process's part of a run spread over several (--shard I/N): exact
 * shares of -c and -n (the first shards take one more), and of -R in
 * proportion to its connections, whose send times interleave with the
 * other shards' as one process's connections would. Without --shard, the
 * one part is the whole run. */
struct shard {
    uint64_t index, count; /* count 0: not sharded */
    uint64_t connections;  /* this shard's connections */
    uint64_t first_conn;   /* global index of its first one among all shards' */
    uint64_t requests;     /* its share of -n, 0 without -n */
    double rate;           /* its share of -R, 0 without -R */
};

struct config {
    uint64_t connections;
    uint64_t threads;
    bool threads_set; /* -t given (otherwise threads is at most connections) */
    uint64_t duration_us;
    bool duration_set;      /* -d given (with -n, no -d means no time limit) */
    uint64_t time_limit_us; /* when the run ends by itself: -d, or 0 for none (-d 0, or -n
                               without -d) */
    uint64_t timeout_us;
    bool latency;

    char *url_arg; /* the URL as typed, for the report */
    struct url url;
    struct header *headers; /* -H, in order, names unique ignoring case */
    size_t nheaders;

    /* Load models (beyond wrk). */
    uint64_t rate;     /* -R: requests/sec over all connections, 0 = closed model */
    bool u_latency;    /* -U: also report latency from the actual send */
    uint64_t requests; /* -n: stop after exactly this many responses, 0 = no limit */
    bool no_keepalive; /* a new connection for every request */
    bool http2;        /* speak HTTP/2: ALPN h2 over TLS, h2c with prior knowledge */
    bool http3;        /* speak HTTP/3 over QUIC (ALPN h3) */
    bool early_data;   /* --0rtt: HTTP/3 requests as 0-RTT data when resuming */
    bool ecn;          /* --ecn: HTTP/3 packets ECN-capable, marks received counted */
    uint64_t streams;  /* -m: requests in flight per connection (HTTP/2 streams,
                          HTTP/1.1 pipeline depth of the static request) */
    char *unix_socket; /* connect here instead of the URL's host and port */
    /* --stages: the open model's target over time. rate is then the mean
     * target of the stages and stages_from the rate they start from (-R,
     * or 0); duration_us their sum. */
    struct stage *stages;
    size_t nstages;
    uint64_t stages_from;
    uint64_t ramp_up_us; /* closed model: the connections open evenly over it */
    uint64_t warmup_us;  /* run this long first, left out of every result */

    /* Pass/fail: --threshold, each parsed; --abort-on-fail after abort_after
     * failing intervals in a row (0 without it). */
    struct threshold *thresholds;
    size_t nthresholds;
    uint64_t abort_after;

    /* TLS. */
    char *sni;   /* server name to send instead of the URL's host */
    bool verify; /* verify the server certificate */
    char *cacert, *cert, *key;

    /* Output. */
    char *json;    /* --json FILE, "-" for stdout */
    bool progress; /* live progress line when stderr is a terminal */

    /* Results over time. */
    uint64_t interval_us; /* --interval */
    char *timeline;       /* --timeline FILE (CSV if it ends in .csv), "-" for stdout */
    char *hdr_log;        /* --hdr-log FILE */
    char **server_pids;   /* --server-pid, as given: PIDs or process names */
    size_t nserver_pids;

    /* Beyond one machine: connections, rate and requests above are the
     * whole run's, shard this process's part of it. */
    struct shard shard;
    char *start_at;      /* --start-at as given, or NULL */
    int64_t start_at_us; /* the same instant, Unix time in us */

    char *script;       /* -s FILE or NULL */
    char **script_args; /* args[1..] for init(); the URL is args[0] */
    size_t nscript_args;
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

/* The header named name (ignoring case), or NULL. */
const struct header *cli_header(const struct config *cfg, const char *name);

#endif
