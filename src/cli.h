/* The command line: the only place that knows option spellings. Produces a
 * read-only struct config, or exits with a one-line error.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CLI_H
#define VOLLEY_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "url.h"

struct header {
    char *name;
    char *value;
};

struct config {
    uint64_t connections;
    uint64_t threads;
    uint64_t duration_us;
    bool duration_set; /* -d given (with -n, no -d means no time limit) */
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
    uint64_t streams;  /* -m: requests in flight per connection (HTTP/2 streams,
                          HTTP/1.1 pipeline depth of the static request) */
    char *unix_socket; /* connect here instead of the URL's host and port */

    /* TLS. */
    char *sni;   /* server name to send instead of the URL's host */
    bool verify; /* verify the server certificate */
    char *cacert, *cert, *key;

    /* Output. */
    char *json;    /* --json FILE, "-" for stdout */
    bool progress; /* live progress line when stderr is a terminal */

    char *script;       /* -s FILE or NULL */
    char **script_args; /* args[1..] for init(); the URL is args[0] */
    size_t nscript_args;
};

/* Parses argv; prints usage and exits 0 for -h, prints the version and exits 0
 * for -v, prints "volley: <what is wrong>" (then usage) and exits 1 on bad input. */
void cli_parse(int argc, char **argv, struct config *cfg);
void cli_free(struct config *cfg);

/* The header named name (ignoring case), or NULL. */
const struct header *cli_header(const struct config *cfg, const char *name);

#endif
