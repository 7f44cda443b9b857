/* What a run asked for, as one description: filled from the command line
 * (cli.c) or, by volley merge, from the options of the results it adds up
 * (merge_read.c). Every writer (the text report, --json, the timeline and
 * the HdrHistogram log) reads the run from this, never from the command
 * line's parser; the engine reads its load model here too.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SPEC_H
#define VOLLEY_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols.h"
#include "request.h"

struct json;

/* The shortest --interval: shorter ones would cost more in writing records
 * than they show. */
#define SPEC_INTERVAL_MIN_US 10000

/* One stage of --stages: the rate ramps to rate over duration_us. */
struct stage {
    uint64_t duration_us;
    uint64_t rate;
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

/* How the connections move their bytes (--engine). */
enum spec_engine {
    SPEC_ENGINE_AUTO,     /* io_uring where the kernel allows it and the connections' transport
                             runs on it, else epoll; settled before the run starts */
    SPEC_ENGINE_EPOLL,    /* readiness, through the workers' libev loops */
    SPEC_ENGINE_IO_URING, /* completions, through a ring per worker */
};

/* --label NAME=VALUE: names the run in /metrics and remote write. */
struct label {
    char *name, *value;
};

struct run_spec {
    char *url; /* as typed */
    bool tls;  /* an https URL */
    uint64_t threads, connections;
    uint64_t duration_us;   /* -d, as the report's header says it */
    uint64_t time_limit_us; /* when the run ends by itself: -d, or 0 for none (-d 0, or -n
                               without -d) */
    uint64_t timeout_us;
    uint64_t rate;     /* -R: requests/sec over all connections, 0 = closed model */
    uint64_t requests; /* -n: stop after exactly this many responses, 0 = no limit */
    /* --stages: the open model's target over time. rate is then the mean
     * target of the stages and stages_from the rate they start from (-R,
     * or 0); duration_us their sum. */
    struct stage *stages;
    size_t nstages;
    uint64_t stages_from;
    uint64_t ramp_up_us; /* closed model: the connections open evenly over it */
    uint64_t warmup_us;  /* run this long first, left out of every result */
    /* The protocols a connection may speak (--http2, --alpn), in order of
     * preference: over TLS, offered in ALPN, each connection speaking the
     * one its server chose; over cleartext exactly one (HTTP/2: with prior
     * knowledge). Read through the functions below, and by tls.c (the
     * offer) and worker.c (a connection's choices), nowhere else. */
    const struct proto_ops *protocols[PROTOCOLS_COUNT];
    size_t nprotocols;
    uint64_t streams;   /* -m: requests in flight per connection (HTTP/2 streams,
                            HTTP/1.1 pipeline depth of the static request) */
    bool no_keepalive;  /* a new connection for every request */
    char *unix_socket;  /* connect here instead of the URL's host and port */
    char *proxy;        /* through this proxy (its URL without credentials), or NULL */
    char *bind;         /* --bind as given, or NULL */
    char *bind_ports;   /* --bind-port-range as given, or NULL */
    char *script;       /* -s FILE or NULL */
    char **script_args; /* args[1..] for init(); the URL is args[0] */
    size_t nscript_args;
    struct header *headers; /* -H, in order, names unique ignoring case */
    size_t nheaders;
    /* Results over time: 0 when no intervals are known (volley merge
     * without the parts' timelines). */
    uint64_t interval_us;
    char *timeline; /* --timeline FILE (CSV if it ends in .csv), "-" for stdout */
    char *hdr_log;  /* --hdr-log FILE */
    /* Beyond one machine: connections, rate and requests above are the
     * whole run's, shard this process's part of it. */
    struct shard shard;
    /* What the text report prints: -L, -U. */
    bool latency, u_latency;
    /* --engine as asked; from the header on, the one the run ran on (auto
     * only in a merged result of versions that did not say). */
    enum spec_engine engine;
    /* Live metrics (/metrics, remote write): the labels beside url and
     * shard, and the latency histograms' bucket bounds (us, ascending). */
    struct label *labels;
    size_t nlabels;
    uint64_t *buckets;
    size_t nbuckets;
};

/* A copy of src, owning its own strings and lists. */
void spec_copy(struct run_spec *dst, const struct run_spec *src);
void spec_free(struct run_spec *spec);

/* The header named name (ignoring case), or NULL. */
const struct header *spec_header(const struct run_spec *spec, const char *name);
/* -H name: value, replacing a header of the same name (ignoring case). */
void spec_set_header(struct run_spec *spec, const char *name, size_t name_len, const char *value,
                     size_t value_len);

/* The options object of the --json document: what the run asked for, and
 * the requests a batch held (pipeline). */
void spec_json(struct json *j, const struct run_spec *spec, size_t pipeline);

/* "epoll", "io_uring"; NULL for auto. */
const char *spec_engine_name(enum spec_engine engine);
/* The engine named name ("auto" too); false when there is none of that
 * name. */
bool spec_set_engine(struct run_spec *spec, const char *name);

/* Whether a connection may speak p. */
bool spec_offers(const struct run_spec *spec, const struct proto_ops *p);
/* Whether a connection may speak the protocol whose own figures sit at
 * place (STATS_AT_HTTP2): whether the document has them. */
bool spec_offers_figures(const struct run_spec *spec, enum stats_place place);
/* Whether the run speaks a protocol with a transport of its own: HTTP/3,
 * over QUIC (UDP) rather than TCP. */
bool spec_quic(const struct run_spec *spec);
/* The protocol asked for when it is one, or NULL for several. */
const struct proto_ops *spec_only_protocol(const struct run_spec *spec);
/* Its name ("HTTP/2"), or NULL for several. */
const char *spec_protocol(const struct run_spec *spec);
/* The protocols' names joined by sep into buf ("HTTP/2 or HTTP/1.1"), or
 * with alpn their ALPN ids ("h2,http/1.1"). */
char *spec_protocols_text(const struct run_spec *spec, bool alpn, const char *sep, char *buf,
                          size_t size);
/* Whether the two runs asked for the same protocols, in the same order. */
bool spec_same_protocols(const struct run_spec *a, const struct run_spec *b);
/* The protocols from a list of ALPN ids (alpn) or names; false when one
 * is unknown or there is none (or more than PROTOCOLS_COUNT). */
bool spec_set_protocols(struct run_spec *spec, const char *const *list, size_t n, bool alpn);

/* --shard: this process's shares of the whole run (without --shard, the
 * whole); false with a one-line reason in err when the run cannot be
 * divided so. Lowers threads to the shard's connections. */
bool spec_shard_shares(struct run_spec *spec, char *err, size_t errlen);
/* --stages: the run lasts their sum, at a mean target that stands for -R
 * wherever one rate is reported; the profile starts from -R. False with a
 * reason in err when the stages last no time or send nothing. */
bool spec_stage_rates(struct run_spec *spec, char *err, size_t errlen);

/* -R, --stages: the whole run's target rate over time, from the start of
 * the schedule: the warm-up at the rate the run starts from, then the
 * stages, or -R to the end. Free it with profile_free. */
struct profile;
void spec_profile(const struct run_spec *spec, struct profile *p);
/* Thread t's connections in the run's order of turns (-R's sends,
 * --ramp-up's opens): its connection i has place first + i stride. */
void spec_turns(const struct run_spec *spec, size_t thread, uint64_t *first, uint64_t *stride);
/* The part of the whole run's target rate this shard sends: its share of
 * the connections (1 unsharded). */
double spec_rate_share(const struct run_spec *spec);

#endif
