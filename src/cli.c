/* Command-line parsing with wrk's spellings and rules (wrk-spec §1): GNU
 * getopt_long, so long-option prefixes, --opt=value, options after the URL
 * and "--" all work; SI and time units; one clear error line for bad input.
 * SPDX-License-Identifier: MIT */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chars.h"
#include "cli_route.h"
#include "cli_usage.h"
#include "h1.h"
#include "net.h"
#include "protocols.h"
#include "stats.h"
#include "threshold.h"
#include "units.h"
#include "version.h"
#include "xalloc.h"

/* -m: far more than any server allows (nginx: 128), and what an HTTP/1.1
 * pipeline of that many copies of a request can hold in memory. */
#define CLI_STREAMS_MAX 1000000
/* --metrics-buckets: more would only make every scrape longer. */
#define CLI_BUCKETS_MAX 100

/* -k is not an option: it is caught to answer ApacheBench's habit. */
static const char short_options[] = "c:d:t:s:H:LT:vhR:Un:m:k";

/* Long options without a short form. */
enum {
    OPT_NO_KEEPALIVE = 256,
    OPT_HTTP2,
    OPT_HTTP3,
    OPT_EARLY_DATA,
    OPT_ECN,
    OPT_UNIX_SOCKET,
    OPT_SNI,
    OPT_VERIFY,
    OPT_CACERT,
    OPT_CERT,
    OPT_KEY,
    OPT_JSON,
    OPT_NO_PROGRESS,
    OPT_TIMELINE,
    OPT_INTERVAL,
    OPT_HDR_LOG,
    OPT_SERVER_PID,
    OPT_SHARD,
    OPT_START_AT,
    OPT_STAGES,
    OPT_RAMP_UP,
    OPT_WARMUP,
    OPT_THRESHOLD,
    OPT_ABORT_ON_FAIL,
    OPT_ABORT_AFTER,
    OPT_LIST_FIELDS,
    OPT_METRICS_LISTEN,
    OPT_METRICS_LINGER,
    OPT_REMOTE_WRITE,
    OPT_REMOTE_WRITE_STRICT,
    OPT_LABEL,
    OPT_METRICS_BUCKETS,
    OPT_ALPN,
    OPT_ENGINE,
    OPT_PROXY,
    OPT_PROXY_ENV,
    OPT_BIND,
    OPT_BIND_PORT_RANGE,
};

static const struct option long_options[] = {
    {"connections", required_argument, NULL, 'c'},
    {"duration", required_argument, NULL, 'd'},
    {"threads", required_argument, NULL, 't'},
    {"script", required_argument, NULL, 's'},
    {"header", required_argument, NULL, 'H'},
    {"latency", no_argument, NULL, 'L'},
    {"timeout", required_argument, NULL, 'T'},
    {"version", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"rate", required_argument, NULL, 'R'},
    {"u_latency", no_argument, NULL, 'U'},
    {"requests", required_argument, NULL, 'n'},
    {"streams", required_argument, NULL, 'm'},
    {"http2", no_argument, NULL, OPT_HTTP2},
    {"alpn", required_argument, NULL, OPT_ALPN},
    {"http3", no_argument, NULL, OPT_HTTP3},
    {"0rtt", no_argument, NULL, OPT_EARLY_DATA},
    {"ecn", no_argument, NULL, OPT_ECN},
    {"no-keepalive", no_argument, NULL, OPT_NO_KEEPALIVE},
    {"unix-socket", required_argument, NULL, OPT_UNIX_SOCKET},
    {"engine", required_argument, NULL, OPT_ENGINE},
    {"proxy", required_argument, NULL, OPT_PROXY},
    {"proxy-env", no_argument, NULL, OPT_PROXY_ENV},
    {"bind", required_argument, NULL, OPT_BIND},
    {"bind-port-range", required_argument, NULL, OPT_BIND_PORT_RANGE},
    {"sni", required_argument, NULL, OPT_SNI},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"cacert", required_argument, NULL, OPT_CACERT},
    {"cert", required_argument, NULL, OPT_CERT},
    {"key", required_argument, NULL, OPT_KEY},
    {"json", required_argument, NULL, OPT_JSON},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"timeline", required_argument, NULL, OPT_TIMELINE},
    {"interval", required_argument, NULL, OPT_INTERVAL},
    {"hdr-log", required_argument, NULL, OPT_HDR_LOG},
    {"server-pid", required_argument, NULL, OPT_SERVER_PID},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"start-at", required_argument, NULL, OPT_START_AT},
    {"stages", required_argument, NULL, OPT_STAGES},
    {"ramp-up", required_argument, NULL, OPT_RAMP_UP},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"threshold", required_argument, NULL, OPT_THRESHOLD},
    {"abort-on-fail", no_argument, NULL, OPT_ABORT_ON_FAIL},
    {"abort-after", required_argument, NULL, OPT_ABORT_AFTER},
    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
    {"metrics-linger", required_argument, NULL, OPT_METRICS_LINGER},
    {"remote-write", required_argument, NULL, OPT_REMOTE_WRITE},
    {"remote-write-strict", no_argument, NULL, OPT_REMOTE_WRITE_STRICT},
    {"label", required_argument, NULL, OPT_LABEL},
    {"metrics-buckets", required_argument, NULL, OPT_METRICS_BUCKETS},
    /* Not in --help: the table of figures, for the tests of the docs and
     * of volley merge (stats.h). */
    {"list-fields", no_argument, NULL, OPT_LIST_FIELDS},
    {NULL, 0, NULL, 0},
};

/* wrk's own long options. A prefix that names one of them in wrk names it
 * here too, though an option volley added would make it ambiguous (--thr
 * is --threads, not --threshold; --time is --timeout). */
static const char *const wrk_long_options[] = {
    "connections", "duration", "threads", "script", "header",
    "latency",     "timeout",  "version", "help",
};
/* The arguments rewritten so, freed by cli_free. */
static char **expanded;
static size_t nexpanded;

/* The wrk option arg ("--thr" or "--thr=2") abbreviates, or NULL. */
static const char *wrk_option(const char *arg)
{
    const char *found = NULL;
    size_t len = strcspn(arg + 2, "=");
    for (const struct option *o = long_options; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, arg + 2, len) == 0)
            return NULL; /* an option's whole name */
    for (size_t i = 0; i < sizeof wrk_long_options / sizeof wrk_long_options[0]; i++) {
        if (strncmp(wrk_long_options[i], arg + 2, len) == 0) {
            if (found)
                return NULL; /* ambiguous in wrk too */
            found = wrk_long_options[i];
        }
    }
    return found;
}

static void expand_wrk_prefixes(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *name;
        if (strncmp(argv[i], "--", 2) != 0 || !argv[i][2] || !(name = wrk_option(argv[i])))
            continue;
        const char *value = argv[i] + 2 + strcspn(argv[i] + 2, "=");
        size_t n = strlen(name) + strlen(value) + 3;
        char *full = xmalloc(n);
        snprintf(full, n, "--%s%s", name, value);
        expanded = xrealloc(expanded, (nexpanded + 1) * sizeof *expanded);
        argv[i] = expanded[nexpanded++] = full;
    }
}

/* After the line saying what is wrong: where to look, rather than the whole
 * usage, which would push that line off the screen. */
static void point_to_help(const char *command) __attribute__((noreturn));
static void point_to_help(const char *command)
{
    fprintf(stderr, "Try '%s --help' for more information.\n", command);
    exit(1);
}

static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("volley: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    point_to_help("volley");
}

/* The value of a count or a duration outside what it may be: said in the
 * same form as a value that is not a number at all. */
static void check_range(const char *what, const char *arg, uint64_t v, uint64_t min, uint64_t max)
{
    if (v >= min && v <= max)
        return;
    if (max == UINT64_MAX)
        usage_error("invalid %s: '%s' (must be at least %" PRIu64 ")", what, arg, min);
    usage_error("invalid %s: '%s' (must be %" PRIu64 " to %" PRIu64 ")", what, arg, min, max);
}

/* A count: a whole number, with an optional SI suffix, from min to max. */
static uint64_t count_arg(const char *what, const char *arg, uint64_t min, uint64_t max)
{
    uint64_t v;
    if (!units_parse_metric(arg, &v))
        usage_error("invalid %s: '%s' (a whole number, optionally with k, M, G, T or P)", what,
                    arg);
    check_range(what, arg, v, min, max);
    return v;
}

/* A duration of at least min_us. */
static uint64_t time_arg(const char *what, const char *arg, uint64_t min_us)
{
    uint64_t v;
    char buf[UNITS_BUF];
    if (!units_parse_time(arg, &v))
        usage_error("invalid %s: '%s' (a duration such as 500ms, 1.5s, 2m or 1h)", what, arg);
    if (v >= min_us)
        return v;
    if (min_us == 1)
        usage_error("invalid %s: '%s' (must be more than 0)", what, arg);
    usage_error("invalid %s: '%s' (must be at least %s)", what, arg, units_duration(min_us, buf));
}

/* "Name: value" with optional whitespace after the colon (wrk silently drops
 * a header without the space, wg/wrk#404). Names are unique ignoring case: a
 * later -H replaces an earlier one of the same name. */
static void add_header(struct config *cfg, const char *arg)
{
    const char *colon = strchr(arg, ':');
    size_t name_len = colon ? (size_t)(colon - arg) : 0;
    if (!colon || name_len == 0)
        usage_error("invalid header '%s': expected \"Name: value\"", arg);
    for (size_t i = 0; i < name_len; i++)
        if ((unsigned char)arg[i] <= ' ' || arg[i] == 0x7f)
            usage_error("invalid header '%s': the name may not contain spaces", arg);
    const char *value = colon + 1;
    while (*value == ' ' || *value == '\t')
        value++;
    size_t value_len = strlen(value);
    while (value_len && (value[value_len - 1] == ' ' || value[value_len - 1] == '\t'))
        value_len--;
    for (size_t i = 0; i < value_len; i++)
        if (value[i] == '\r' || value[i] == '\n')
            usage_error("invalid header '%s': line breaks are not allowed", arg);

    spec_set_header(&cfg->spec, arg, name_len, value, value_len);
}

/* A plain decimal number, nothing else. */
static bool decimal(const char *s, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    if (s == end)
        return false;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* "I/N", or with index_only (VOLLEY_SHARD without a count) just "I". */
static void shard_arg(struct config *cfg, const char *what, const char *arg, bool index_only)
{
    const char *slash = strchr(arg, '/'), *end = arg + strlen(arg);
    if (!decimal(arg, slash ? slash : end, &cfg->spec.shard.index) ||
        (slash ? !decimal(slash + 1, end, &cfg->spec.shard.count) : !index_only))
        usage_error("invalid %s '%s': expected I/N, shard I of N counting from 0", what, arg);
    if (slash && cfg->spec.shard.count == 0)
        usage_error("invalid %s '%s': there must be at least one shard", what, arg);
}

/* One pod spec serves every shard of a Kubernetes Indexed Job: the count
 * comes from VOLLEY_SHARDS and the index from JOB_COMPLETION_INDEX, which
 * the Job controller sets in each pod; VOLLEY_SHARD may say either or both.
 * Whatever is set must make one shard: a pod that half-says which one it is
 * would otherwise run the whole load, multiplying it by the shards. An
 * empty variable counts as not set (as a shell's ${VAR:-} would). */
static void shard_env(struct config *cfg)
{
    const char *shard = getenv("VOLLEY_SHARD"), *shards = getenv("VOLLEY_SHARDS");
    const char *index = getenv("JOB_COMPLETION_INDEX");
    uint64_t count = 0;
    shard = shard && *shard ? shard : NULL;
    shards = shards && *shards ? shards : NULL;
    if (shards && (!decimal(shards, shards + strlen(shards), &count) || count == 0))
        usage_error("invalid VOLLEY_SHARDS '%s': expected the number of shards", shards);
    if (shard)
        shard_arg(cfg, "VOLLEY_SHARD", shard, true);
    else if (shards && index && *index)
        shard_arg(cfg, "JOB_COMPLETION_INDEX", index, true);
    else if (shards)
        usage_error("VOLLEY_SHARDS is set, but neither VOLLEY_SHARD nor JOB_COMPLETION_INDEX "
                    "says which shard this is");
    else
        return;
    if (cfg->spec.shard.count && count && cfg->spec.shard.count != count)
        usage_error("VOLLEY_SHARD=%s and VOLLEY_SHARDS=%s disagree on the number of shards", shard,
                    shards);
    if (!cfg->spec.shard.count && !count)
        usage_error("VOLLEY_SHARD=%s says which shard this is, but not of how many: set "
                    "VOLLEY_SHARDS, or VOLLEY_SHARD=%s/N",
                    shard, shard);
    if (!cfg->spec.shard.count)
        cfg->spec.shard.count = count;
}

/* The whole run is the one part there is unless --shard says otherwise. */
static void shard_shares(struct config *cfg)
{
    char why[160];
    if (!spec_shard_shares(&cfg->spec, why, sizeof why))
        usage_error("%s", why);
}

static void set_string(char **field, const char *arg)
{
    free(*field);
    *field = xstrdup(arg);
}

/* -d: 0 and "inf" mean no time limit (the run ends with Ctrl-C). */
static void set_duration(struct config *cfg, const char *arg)
{
    cfg->spec.duration_us = strcasecmp(arg, "inf") == 0 ? 0 : time_arg("duration", arg, 0);
    cfg->duration_set = true;
}

/* One stage, "30s:1000", of the list arg. */
static struct stage stage_arg(const char *item, size_t len, const char *arg)
{
    char *text = xstrndup(item, len), *colon = strchr(text, ':');
    struct stage st;
    if (colon)
        *colon = 0;
    if (!colon || !units_parse_time(text, &st.duration_us) ||
        !units_parse_metric(colon + 1, &st.rate))
        usage_error("invalid stages '%s': expected DURATION:RATE,..., as in 30s:1000,1m:1000", arg);
    free(text);
    return st;
}

/* "30s:1000,1m:1000,30s:0". */
static void set_stages(struct config *cfg, const char *arg)
{
    free(cfg->spec.stages);
    cfg->spec.stages = NULL;
    cfg->spec.nstages = 0;
    for (const char *item = arg;; item++) {
        size_t len = strcspn(item, ",");
        cfg->spec.stages =
            xrealloc(cfg->spec.stages, (cfg->spec.nstages + 1) * sizeof *cfg->spec.stages);
        cfg->spec.stages[cfg->spec.nstages++] = stage_arg(item, len, arg);
        item += len;
        if (!*item)
            break;
    }
}

static void add_threshold(struct threshold **list, size_t *n, const char *arg,
                          void (*error)(const char *, ...))
{
    char why[256];
    *list = xrealloc(*list, (*n + 1) * sizeof **list);
    if (!threshold_parse(arg, &(*list)[*n], why, sizeof why))
        error("invalid threshold '%s': %s", arg, why);
    (*n)++;
}

static void free_thresholds(struct threshold *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        threshold_free(&list[i]);
    free(list);
}

static void add_server_pid(struct config *cfg, const char *arg)
{
    if (!*arg)
        usage_error("invalid --server-pid: empty");
    cfg->server_pids =
        xrealloc(cfg->server_pids, (cfg->nserver_pids + 1) * sizeof *cfg->server_pids);
    cfg->server_pids[cfg->nserver_pids++] = xstrdup(arg);
}

/* Names volley's own metrics use for labels: a --label may not take them. */
static const char *const reserved_labels[] = {"url",   "shard", "le",      "status",  "cause",
                                              "class", "code",  "version", "protocol"};

/* --label NAME=VALUE: a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not
 * reserved, given once) and a value that is UTF-8 and not empty (an empty
 * value is no label at all in Prometheus). */
static void add_label(struct config *cfg, const char *arg)
{
    const char *eq = strchr(arg, '='), *value = eq ? eq + 1 : NULL;
    size_t len = eq ? (size_t)(eq - arg) : 0;
    struct run_spec *spec = &cfg->spec;
    if (!eq || len == 0 || !*value)
        usage_error("invalid --label '%s': expected NAME=VALUE", arg);
    for (size_t i = 0; i < len; i++)
        if (!(arg[i] == '_' || (arg[i] >= 'a' && arg[i] <= 'z') ||
              (arg[i] >= 'A' && arg[i] <= 'Z') || (i > 0 && arg[i] >= '0' && arg[i] <= '9')))
            usage_error("invalid --label '%s': a name is letters, digits and _, not starting "
                        "with a digit",
                        arg);
    if (len >= 2 && arg[0] == '_' && arg[1] == '_')
        usage_error("invalid --label '%s': names starting with __ are Prometheus' own", arg);
    for (size_t i = 0; i < sizeof reserved_labels / sizeof reserved_labels[0]; i++)
        if (strlen(reserved_labels[i]) == len && strncmp(arg, reserved_labels[i], len) == 0)
            usage_error("invalid --label '%s': volley's metrics use the label %s", arg,
                        reserved_labels[i]);
    for (size_t i = 0; i < spec->nlabels; i++)
        if (strlen(spec->labels[i].name) == len && strncmp(arg, spec->labels[i].name, len) == 0)
            usage_error("invalid --label '%s': label %s is given twice", arg, spec->labels[i].name);
    for (const unsigned char *p = (const unsigned char *)value, *end = p + strlen(value);
         p < end;) {
        size_t n = *p < 0x80 ? 1 : utf8_length(p, end);
        if (n == 0 || *p < 0x20 || *p == 0x7f)
            usage_error("invalid --label '%s': the value must be UTF-8 text without control "
                        "characters",
                        arg);
        p += n;
    }
    spec->labels = xrealloc(spec->labels, (spec->nlabels + 1) * sizeof *spec->labels);
    spec->labels[spec->nlabels++] = (struct label){xstrndup(arg, len), xstrdup(value)};
}

/* --metrics-buckets: times, ascending, each above the last. */
static void set_buckets(struct config *cfg, const char *arg)
{
    struct run_spec *spec = &cfg->spec;
    char *copy = xstrdup(arg), *save = NULL;
    spec->nbuckets = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint64_t us;
        if (!units_parse_time(t, &us) || us == 0)
            usage_error("invalid --metrics-buckets '%s': '%s' is not a time above 0", arg, t);
        if (spec->nbuckets && us <= spec->buckets[spec->nbuckets - 1])
            usage_error("invalid --metrics-buckets '%s': the bounds must go up", arg);
        if (spec->nbuckets == CLI_BUCKETS_MAX)
            usage_error("invalid --metrics-buckets '%s': at most %d bounds", arg, CLI_BUCKETS_MAX);
        spec->buckets = xrealloc(spec->buckets, (spec->nbuckets + 1) * sizeof *spec->buckets);
        spec->buckets[spec->nbuckets++] = us;
    }
    free(copy);
    if (!spec->nbuckets)
        usage_error("invalid --metrics-buckets '%s': no bounds", arg);
}

static void set_metrics_listen(struct config *cfg, const char *arg)
{
    char *host, *port;
    const char *why;
    if (!net_parse_listen(arg, &host, &port, &why))
        usage_error("invalid --metrics-listen '%s': %s", arg, why);
    free(host);
    free(port);
    set_string(&cfg->metrics_listen, arg);
}

static void set_remote_write(struct config *cfg, const char *arg)
{
    struct url u;
    const char *why;
    if (!url_parse(arg, &u, &why))
        usage_error("invalid --remote-write URL '%s': %s", arg, why);
    bool tls = u.tls;
    url_free(&u);
    if (tls)
        usage_error("--remote-write: https is not supported; push to http:// (a Prometheus "
                    "agent or a TLS proxy beside volley)");
#ifndef VOLLEY_SNAPPY
    usage_error("--remote-write: this volley was built without libsnappy (remote write "
                "compresses with it): install libsnappy-dev (deps/install.sh does), then rebuild");
#endif
    set_string(&cfg->remote_write, arg);
}

/* --http2, --alpn LIST: the protocols a connection may speak, by their
 * ALPN ids, and the option as given, for messages. */
static void protocols_arg(struct config *cfg, const char *option, const char *list)
{
    const char *ids[PROTOCOLS_COUNT + 1];
    size_t n = 0;
    char *copy = xstrdup(list), *save = NULL;
    bool http2 = strcmp(option, "--http2") == 0, http3 = strcmp(option, "--http3") == 0;
    if (cfg->protocol_option && (http3 || strcmp(cfg->protocol_option, "--http3") == 0)) {
        free(copy);
        /* QUIC is offered alone: no TLS over TCP negotiates it */
        const char *other = http3 ? cfg->protocol_option : option;
        usage_error("%.*s and --http3 exclude each other", (int)strcspn(other, " "), other);
    }
    if (cfg->protocol_option && http2 != (strcmp(cfg->protocol_option, "--http2") == 0)) {
        free(copy);
        usage_error("--http2 is --alpn h2: give one of them");
    }
    for (char *id = strtok_r(copy, ",", &save); id && n <= PROTOCOLS_COUNT;
         id = strtok_r(NULL, ",", &save))
        ids[n++] = id;
    bool ok = spec_set_protocols(&cfg->spec, ids, n, true);
    free(copy);
    if (!ok)
        usage_error("invalid %s '%s': a list of protocols volley speaks, each once: h2, "
                    "http/1.1",
                    option, list);
    if (!http3 && spec_quic(&cfg->spec))
        usage_error("invalid %s '%s': h3 runs over QUIC, not TLS over TCP: give --http3", option,
                    list);
    free(cfg->protocol_option);
    cfg->protocol_option = http2 || http3 ? xstrdup(option) : xasprintf("%s %s", option, list);
}

/* --engine NAME, or VOLLEY_ENGINE (what is given as what, for messages). */
static void engine_arg(struct config *cfg, const char *what, const char *name)
{
    if (!spec_set_engine(&cfg->spec, name))
        usage_error("invalid %s '%s': epoll, io_uring or auto", what, name);
    free(cfg->engine_option);
    cfg->engine_option = xasprintf("%s%s%s", what, *what == '-' ? " " : "=", name);
}

static void defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->spec.connections = 10;
    cfg->spec.threads = 2;
    cfg->spec.duration_us = 10 * 1000000ULL;
    cfg->spec.timeout_us = 2 * 1000000ULL;
    cfg->spec.streams = 1;
    cfg->spec.protocols[0] = &proto_h1;
    cfg->spec.nprotocols = 1;
    cfg->progress = true;
    cfg->spec.interval_us = 1000000;
}

/* The options of the live metrics, against each other. */
static void validate_metrics(const struct config *cfg, bool linger_set)
{
    bool live = cfg->metrics_listen || cfg->remote_write;
    if (linger_set && !cfg->metrics_listen)
        usage_error("--metrics-linger needs --metrics-listen");
    if (cfg->remote_write_strict && !cfg->remote_write)
        usage_error("--remote-write-strict needs --remote-write");
    if (cfg->spec.nlabels && !live)
        usage_error("--label needs --metrics-listen or --remote-write");
    if (cfg->spec.nbuckets && !live)
        usage_error("--metrics-buckets needs --metrics-listen or --remote-write");
}

static void parse_options(int argc, char **argv, struct config *cfg, bool *from_env)
{
    int c;
    bool abort_on_fail = false, abort_after_set = false, linger_set = false;
    /* getopt prints its own "volley: unrecognized option '--foo'" lines. */
    char *argv0 = argv[0];
    argv[0] = "volley";
    optind = 1;
    while ((c = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg->spec.connections = count_arg("number of connections", optarg, 1, UINT64_MAX);
            break;
        case 'd':
            set_duration(cfg, optarg);
            break;
        case 't':
            cfg->spec.threads = count_arg("number of threads", optarg, 1, UINT64_MAX);
            cfg->threads_set = true;
            break;
        case 's':
            set_string(&cfg->spec.script, optarg);
            break;
        case 'H':
            add_header(cfg, optarg);
            break;
        case 'L':
            cfg->spec.latency = true;
            break;
        case 'T':
            cfg->spec.timeout_us = time_arg("timeout", optarg, 1);
            break;
        case 'R':
            cfg->spec.rate = count_arg("rate", optarg, 1, UINT64_MAX);
            break;
        case 'U':
            cfg->spec.u_latency = true;
            break;
        case 'n':
            cfg->spec.requests = count_arg("number of requests", optarg, 1, UINT64_MAX);
            break;
        case 'm':
            cfg->spec.streams = count_arg("number of streams", optarg, 1, CLI_STREAMS_MAX);
            break;
        case OPT_HTTP2:
            protocols_arg(cfg, "--http2", "h2");
            break;
        case OPT_ALPN:
            protocols_arg(cfg, "--alpn", optarg);
            break;
        case OPT_HTTP3:
#ifndef VOLLEY_HTTP3
            die("--http3: this volley was built without HTTP/3: install ngtcp2 >= 1.11 (with "
                "its GnuTLS helper) and nghttp3 >= 1.8 (deps/install.sh does), then rebuild");
#endif
            protocols_arg(cfg, "--http3", "h3");
            break;
        case OPT_EARLY_DATA:
            cfg->early_data = true;
            break;
        case OPT_ECN:
            cfg->ecn = true;
            break;
        case OPT_NO_KEEPALIVE:
            cfg->spec.no_keepalive = true;
            break;
        case OPT_ENGINE:
            engine_arg(cfg, "--engine", optarg);
            break;
        case OPT_UNIX_SOCKET:
            if (!*optarg)
                usage_error("invalid Unix socket path: empty");
            set_string(&cfg->spec.unix_socket, optarg);
            break;
        case OPT_PROXY:
            cli_route_proxy(cfg, optarg, usage_error);
            break;
        case OPT_PROXY_ENV:
            *from_env = true;
            break;
        case OPT_BIND:
            cli_route_bind(cfg, optarg, usage_error);
            break;
        case OPT_BIND_PORT_RANGE:
            cli_route_ports(cfg, optarg, usage_error);
            break;
        case OPT_SNI:
            set_string(&cfg->sni, optarg);
            break;
        case OPT_VERIFY:
            cfg->verify = true;
            break;
        case OPT_CACERT:
            set_string(&cfg->cacert, optarg);
            break;
        case OPT_CERT:
            set_string(&cfg->cert, optarg);
            break;
        case OPT_KEY:
            set_string(&cfg->key, optarg);
            break;
        case OPT_JSON:
            set_string(&cfg->json, optarg);
            break;
        case OPT_NO_PROGRESS:
            cfg->progress = false;
            break;
        case OPT_TIMELINE:
            set_string(&cfg->spec.timeline, optarg);
            break;
        case OPT_INTERVAL:
            /* Shorter intervals would cost more in writing records than they show. */
            cfg->spec.interval_us = time_arg("interval", optarg, SPEC_INTERVAL_MIN_US);
            break;
        case OPT_HDR_LOG:
            set_string(&cfg->spec.hdr_log, optarg);
            break;
        case OPT_SERVER_PID:
            add_server_pid(cfg, optarg);
            break;
        case OPT_SHARD:
            shard_arg(cfg, "--shard", optarg, false);
            break;
        case OPT_START_AT:
            if (!units_parse_instant(optarg, &cfg->start_at_us))
                usage_error("invalid start time '%s': expected RFC 3339 "
                            "(2026-11-23T10:16:42Z) or Unix time in seconds",
                            optarg);
            set_string(&cfg->start_at, optarg);
            break;
        case OPT_STAGES:
            set_stages(cfg, optarg);
            break;
        case OPT_RAMP_UP:
            cfg->spec.ramp_up_us = time_arg("ramp-up", optarg, 0);
            break;
        case OPT_WARMUP:
            cfg->spec.warmup_us = time_arg("warm-up", optarg, 0);
            break;
        case OPT_THRESHOLD:
            add_threshold(&cfg->thresholds, &cfg->nthresholds, optarg, usage_error);
            break;
        case OPT_ABORT_ON_FAIL:
            abort_on_fail = true;
            break;
        case OPT_ABORT_AFTER:
            cfg->abort_after = count_arg("--abort-after", optarg, 1, UINT64_MAX);
            abort_after_set = true;
            break;
        case OPT_METRICS_LISTEN:
            set_metrics_listen(cfg, optarg);
            break;
        case OPT_METRICS_LINGER:
            cfg->metrics_linger_us = time_arg("--metrics-linger", optarg, 0);
            linger_set = true;
            break;
        case OPT_REMOTE_WRITE:
            set_remote_write(cfg, optarg);
            break;
        case OPT_REMOTE_WRITE_STRICT:
            cfg->remote_write_strict = true;
            break;
        case OPT_LABEL:
            add_label(cfg, optarg);
            break;
        case OPT_METRICS_BUCKETS:
            set_buckets(cfg, optarg);
            break;
        case OPT_LIST_FIELDS:
            stats_list_fields(stdout);
            exit(0);
        case 'k':
            usage_error("invalid option -- 'k': keep-alive is the default; --no-keepalive opens "
                        "a new connection for every request");
        case 'v':
            puts(version_line());
            exit(0);
        case 'h':
            fputs(cli_usage_text, stdout);
            exit(0);
        default: /* getopt printed what is wrong */
            point_to_help("volley");
        }
    }
    argv[0] = argv0;
    if (abort_after_set && !abort_on_fail)
        usage_error("--abort-after needs --abort-on-fail");
    if (abort_on_fail && !cfg->nthresholds)
        usage_error("--abort-on-fail needs --threshold");
    if (abort_on_fail && !abort_after_set)
        cfg->abort_after = 1;
    validate_metrics(cfg, linger_set);
}

/* --stages: the run lasts their sum, at a mean target that stands for -R
 * wherever one rate is reported; the profile starts from -R. */
static void stage_rates(struct config *cfg)
{
    char why[160];
    if (cfg->duration_set)
        usage_error("--stages sets the duration (the sum of the stages): leave out -d");
    if (!spec_stage_rates(&cfg->spec, why, sizeof why))
        usage_error("%s", why);
    cfg->duration_set = true;
}

/* The options of this change, against each other and the load model. */
static void validate_phases(struct config *cfg)
{
    if (cfg->spec.nstages)
        stage_rates(cfg);
    if (cfg->spec.ramp_up_us && cfg->spec.rate)
        usage_error("--ramp-up is the closed model's ramp: with -R, ramp the rate with --stages");
    if (cfg->spec.warmup_us && cfg->spec.requests)
        usage_error("--warmup does not combine with -n (-n counts every request sent)");
    if (cfg->spec.warmup_us && cfg->spec.nstages && !cfg->spec.stages_from)
        usage_error("--warmup with --stages needs -R: the rate to warm up at");
}

static int to_stdout(const char *path) { return path && strcmp(path, "-") == 0; }

static void validate(struct config *cfg)
{
    /* The default of 2 threads gives way to fewer connections (-c1 -n 1000,
     * an ab habit); an explicit -t does not. */
    if (!cfg->threads_set && cfg->spec.connections < cfg->spec.threads)
        cfg->spec.threads = cfg->spec.connections;
    if (cfg->spec.connections < cfg->spec.threads)
        usage_error("number of connections must be >= threads");
    /* Without a script a request has no body, so nothing to encode. */
    if (!cfg->spec.script && spec_header(&cfg->spec, "Transfer-Encoding"))
        usage_error("-H 'Transfer-Encoding: ...' needs a script that sends a body in that coding");
    validate_phases(cfg);
    shard_shares(cfg);
    if (cfg->spec.u_latency && !cfg->spec.rate)
        usage_error("-U/--u_latency needs -R/--rate");
    /* Over cleartext nothing negotiates: one protocol, h2 with prior knowledge. */
    if (!cfg->url.tls && cfg->spec.nprotocols > 1)
        usage_error("%s: several protocols need an https URL, where TLS chooses one; over http, "
                    "--alpn h2 speaks HTTP/2 with prior knowledge",
                    cfg->protocol_option);
    if (!cfg->url.tls && (cfg->sni || cfg->verify || cfg->cacert || cfg->cert || cfg->key))
        usage_error("TLS options (--sni, --verify, --cacert, --cert, --key) need an https URL");
    if (spec_quic(&cfg->spec) && !cfg->url.tls)
        usage_error("--http3 needs an https URL: QUIC is always encrypted");
    if (spec_quic(&cfg->spec) && cfg->spec.unix_socket)
        usage_error("--http3 runs over UDP: it does not combine with --unix-socket");
    if (cfg->early_data && !spec_quic(&cfg->spec))
        usage_error("--0rtt needs --http3");
    if (cfg->ecn && !spec_quic(&cfg->spec))
        usage_error("--ecn needs --http3");
    if (cfg->cacert)
        cfg->verify = true;
    /* wrk2: -U prints the latency distributions, as -L does. */
    if (cfg->spec.u_latency)
        cfg->spec.latency = true;
    /* Asking the server to close is what makes it one request per
     * connection; it also reaches scripts through wrk.headers. */
    if (cfg->spec.no_keepalive)
        add_header(cfg, "Connection: close");
    if (cfg->key && !cfg->cert)
        usage_error("--key needs --cert");
    if (to_stdout(cfg->json) + to_stdout(cfg->spec.timeline) + to_stdout(cfg->spec.hdr_log) > 1)
        usage_error("only one of --json, --timeline and --hdr-log can write to stdout (-)");
    cfg->spec.time_limit_us = cfg->spec.requests && !cfg->duration_set ? 0 : cfg->spec.duration_us;
    if (cfg->spec.time_limit_us &&
        cfg->spec.ramp_up_us > cfg->spec.warmup_us + cfg->spec.time_limit_us)
        usage_error("--ramp-up is longer than the run: the last connections would never open");
}

void cli_parse(int argc, char **argv, struct config *cfg)
{
    const char *why;
    bool from_env = false;
    defaults(cfg);
    const char *engine = getenv("VOLLEY_ENGINE");
    if (engine && *engine)
        engine_arg(cfg, "VOLLEY_ENGINE", engine);
    expand_wrk_prefixes(argc, argv);
    parse_options(argc, argv, cfg, &from_env);
    /* --shard wins over the environment (it sets a count of at least 1) */
    if (!cfg->spec.shard.count)
        shard_env(cfg);
    if (optind >= argc)
        usage_error("missing URL");
    cfg->spec.url = xstrdup(argv[optind]);
    if (!url_parse(cfg->spec.url, &cfg->url, &why))
        usage_error("invalid URL '%s': %s", cfg->spec.url, why);
    cfg->spec.tls = cfg->url.tls;
    cfg->spec.nscript_args = (size_t)(argc - optind - 1);
    if (cfg->spec.nscript_args && !cfg->spec.script)
        usage_error("unexpected argument '%s' after the URL (script arguments need -s)",
                    argv[optind + 1]);
    cfg->spec.script_args = xcalloc(cfg->spec.nscript_args + 1, sizeof *cfg->spec.script_args);
    for (size_t i = 0; i < cfg->spec.nscript_args; i++)
        cfg->spec.script_args[i] = xstrdup(argv[optind + 1 + (int)i]);
    validate(cfg);
    cli_route_check(cfg, from_env, usage_error);
}

void cli_free(struct config *cfg)
{
    spec_free(&cfg->spec);
    free(cfg->sni);
    free(cfg->cacert);
    free(cfg->cert);
    free(cfg->key);
    free(cfg->json);
    for (size_t i = 0; i < cfg->nserver_pids; i++)
        free(cfg->server_pids[i]);
    free(cfg->server_pids);
    free(cfg->start_at);
    free(cfg->metrics_listen);
    free(cfg->remote_write);
    free(cfg->protocol_option);
    free(cfg->engine_option);
    proxy_free(&cfg->proxy);
    sources_free(&cfg->sources);
    free_thresholds(cfg->thresholds, cfg->nthresholds);
    url_free(&cfg->url);
    for (size_t i = 0; i < nexpanded; i++)
        free(expanded[i]);
    free(expanded);
    expanded = NULL;
    nexpanded = 0;
    memset(cfg, 0, sizeof *cfg);
}

/* ---- volley merge -------------------------------------------------------- */

static void merge_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void merge_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("volley merge: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    point_to_help("volley merge");
}

void cli_parse_merge(int argc, char **argv, struct merge_config *mc)
{
    static const struct option options[] = {
        {"latency", no_argument, NULL, 'L'},
        {"json", required_argument, NULL, OPT_JSON},
        {"timeline", required_argument, NULL, OPT_TIMELINE},
        {"hdr-log", required_argument, NULL, OPT_HDR_LOG},
        {"threshold", required_argument, NULL, OPT_THRESHOLD},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    memset(mc, 0, sizeof *mc);
    char *argv0 = argv[0];
    argv[0] = "volley merge";
    optind = 1;
    while ((c = getopt_long(argc, argv, "Lh", options, NULL)) != -1) {
        switch (c) {
        case 'L':
            mc->latency = true;
            break;
        case OPT_JSON:
            set_string(&mc->json, optarg);
            break;
        case OPT_TIMELINE:
            set_string(&mc->timeline, optarg);
            break;
        case OPT_HDR_LOG:
            set_string(&mc->hdr_log, optarg);
            break;
        case OPT_THRESHOLD:
            add_threshold(&mc->thresholds, &mc->nthresholds, optarg, merge_usage_error);
            break;
        case 'h':
            fputs(cli_merge_usage_text, stdout);
            exit(0);
        default: /* getopt printed what is wrong */
            point_to_help("volley merge");
        }
    }
    argv[0] = argv0;
    if (optind >= argc)
        merge_usage_error("no result files to merge");
    mc->nfiles = (size_t)(argc - optind);
    mc->files = xcalloc(mc->nfiles, sizeof *mc->files);
    size_t stdin_uses = 0;
    for (size_t i = 0; i < mc->nfiles; i++) {
        mc->files[i] = xstrdup(argv[optind + (int)i]);
        stdin_uses += strcmp(mc->files[i], "-") == 0;
    }
    if (stdin_uses > 1)
        merge_usage_error("standard input ('-') can be read only once");
    if (to_stdout(mc->json) + to_stdout(mc->timeline) + to_stdout(mc->hdr_log) > 1)
        merge_usage_error("only one of --json, --timeline and --hdr-log can write to stdout (-)");
}

void cli_free_merge(struct merge_config *mc)
{
    for (size_t i = 0; i < mc->nfiles; i++)
        free(mc->files[i]);
    free(mc->files);
    free(mc->json);
    free(mc->timeline);
    free(mc->hdr_log);
    free_thresholds(mc->thresholds, mc->nthresholds);
    memset(mc, 0, sizeof *mc);
}
