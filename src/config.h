/* struct config: what the command line describes, for the whole process
 * (cli.c fills it, cli_route.c the options of the way to the target).
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CONFIG_H
#define VOLLEY_CONFIG_H

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
    /* "--engine NAME" or "VOLLEY_ENGINE=NAME", for messages; NULL without */
    char *engine_option;

    /* How connections reach the target: --proxy (or --proxy-env), kind
     * PROXY_NONE without; --bind and --bind-port-range, none listed and no
     * range without. */
    struct proxy proxy;
    struct sources sources;

    /* TLS. */
    char *sni;   /* server name to send instead of the URL's host */
    bool verify; /* verify the server certificate */
    char *cacert, *cert, *key;
    /* QUIC (HTTP/3). */
    bool early_data; /* --0rtt: requests as 0-RTT data when resuming */
    bool ecn;        /* --ecn: packets ECN-capable, marks received counted */

    /* Output. */
    char *json;         /* --json FILE, "-" for stdout */
    bool progress;      /* live progress line when stderr is a terminal */
    char **server_pids; /* --server-pid, as given: PIDs or process names */
    size_t nserver_pids;

    /* Live metrics: --metrics-listen ADDR (NULL without), kept up
     * --metrics-linger after the run; --remote-write URL (NULL without). */
    char *metrics_listen;
    uint64_t metrics_linger_us;
    char *remote_write;
    bool remote_write_strict; /* a write that never arrived makes volley exit 1 */

    /* --start-at */
    char *start_at;      /* as given, or NULL */
    int64_t start_at_us; /* the same instant, Unix time in us */
};

#endif
