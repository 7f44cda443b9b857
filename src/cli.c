/* Command-line parsing with wrk's spellings and rules (wrk-spec §1): GNU
 * getopt_long, so long-option prefixes, --opt=value, options after the URL
 * and "--" all work; SI and time units; one clear error line for bad input.
 * SPDX-License-Identifier: MIT */
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "units.h"
#include "version.h"
#include "xalloc.h"

static const char usage_text[] =
    "Usage: volley <options> <url>\n"
    "  Options:\n"
    "    -c, --connections <N>  Connections to keep open\n"
    "    -d, --duration    <T>  Duration of test\n"
    "    -t, --threads     <N>  Number of threads to use\n"
    "\n"
    "    -s, --script      <S>  Load Lua script file\n"
    "    -H, --header      <H>  Add header to request\n"
    "    -L, --latency          Print latency statistics\n"
    "    -T, --timeout     <T>  Socket/request timeout\n"
    "    -v, --version          Print version details\n"
    "    -h, --help             Print this help\n"
    "\n"
    "  Numeric arguments may include a SI unit (1k, 1M, 1G)\n"
    "  Time arguments may include a time unit (500ms, 2s, 2m, 2h)\n";

static const char short_options[] = "c:d:t:s:H:LT:vh";

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
    {NULL, 0, NULL, 0},
};

static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("volley: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fputs(usage_text, stderr);
    exit(1);
}

static uint64_t metric_arg(const char *what, const char *arg)
{
    uint64_t v;
    if (!units_parse_metric(arg, &v))
        usage_error("invalid %s: '%s'", what, arg);
    return v;
}

static uint64_t time_arg(const char *what, const char *arg)
{
    uint64_t v;
    if (!units_parse_time(arg, &v))
        usage_error("invalid %s: '%s'", what, arg);
    return v;
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

    char *name = xstrndup(arg, name_len);
    struct header *h = (struct header *)cli_header(cfg, name);
    if (h) {
        free(h->name);
        free(h->value);
    } else {
        cfg->headers = xrealloc(cfg->headers, (cfg->nheaders + 1) * sizeof *cfg->headers);
        h = &cfg->headers[cfg->nheaders++];
    }
    h->name = name;
    h->value = xstrndup(value, value_len);
}

static void defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->connections = 10;
    cfg->threads = 2;
    cfg->duration_us = 10 * 1000000ULL;
    cfg->timeout_us = 2 * 1000000ULL;
}

static void parse_options(int argc, char **argv, struct config *cfg)
{
    int c;
    /* getopt prints its own "volley: unrecognized option '--foo'" lines. */
    char *argv0 = argv[0];
    argv[0] = "volley";
    optind = 1;
    while ((c = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg->connections = metric_arg("number of connections", optarg);
            break;
        case 'd':
            cfg->duration_us = time_arg("duration", optarg);
            break;
        case 't':
            cfg->threads = metric_arg("number of threads", optarg);
            break;
        case 's':
            free(cfg->script);
            cfg->script = xstrdup(optarg);
            break;
        case 'H':
            add_header(cfg, optarg);
            break;
        case 'L':
            cfg->latency = true;
            break;
        case 'T':
            cfg->timeout_us = time_arg("timeout", optarg);
            break;
        case 'v':
            puts(version_line());
            exit(0);
        case 'h':
            fputs(usage_text, stdout);
            exit(0);
        default:
            fputs(usage_text, stderr);
            exit(1);
        }
    }
    argv[0] = argv0;
}

static void validate(struct config *cfg)
{
    if (cfg->threads == 0)
        usage_error("number of threads must be at least 1");
    if (cfg->duration_us == 0)
        usage_error("duration must be greater than 0");
    if (cfg->timeout_us == 0)
        usage_error("timeout must be greater than 0");
    if (cfg->connections == 0)
        usage_error("number of connections must be at least 1");
    if (cfg->connections < cfg->threads)
        usage_error("number of connections must be >= threads");
}

void cli_parse(int argc, char **argv, struct config *cfg)
{
    const char *why;
    defaults(cfg);
    parse_options(argc, argv, cfg);
    if (optind >= argc)
        usage_error("missing URL");
    cfg->url_arg = xstrdup(argv[optind]);
    if (!url_parse(cfg->url_arg, &cfg->url, &why))
        usage_error("invalid URL '%s': %s", cfg->url_arg, why);
    cfg->nscript_args = (size_t)(argc - optind - 1);
    if (cfg->nscript_args && !cfg->script)
        usage_error("unexpected argument '%s' after the URL (script arguments need -s)",
                    argv[optind + 1]);
    cfg->script_args = xcalloc(cfg->nscript_args + 1, sizeof *cfg->script_args);
    for (size_t i = 0; i < cfg->nscript_args; i++)
        cfg->script_args[i] = xstrdup(argv[optind + 1 + (int)i]);
    validate(cfg);
}

void cli_free(struct config *cfg)
{
    for (size_t i = 0; i < cfg->nheaders; i++) {
        free(cfg->headers[i].name);
        free(cfg->headers[i].value);
    }
    free(cfg->headers);
    for (size_t i = 0; i < cfg->nscript_args; i++)
        free(cfg->script_args[i]);
    free(cfg->script_args);
    free(cfg->script);
    free(cfg->url_arg);
    url_free(&cfg->url);
    memset(cfg, 0, sizeof *cfg);
}

const struct header *cli_header(const struct config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nheaders; i++)
        if (strcasecmp(cfg->headers[i].name, name) == 0)
            return &cfg->headers[i];
    return NULL;
}
