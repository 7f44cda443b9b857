/* Unit tests for the JSON report and the generator's CPU load, on results
 * built here: the corners a real run rarely reaches (nothing measured at all,
 * every attempt failed, codes outside 1..999, the saturation threshold).
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include <getopt.h>

#include "cli.h"
#include "report.h"

static char *argv_run[] = {
    "volley", "-t", "2", "-c", "4", "-d", "3", "-H", "X-A: \"q\"", "http://127.0.0.1:1/p", NULL};

/* The JSON document of r. Caller frees. */
static char *render(const struct result *r)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK(report_json(f, r));
    fclose(f);
    return out;
}

#define CHECK_HAS(doc, text)                                                                       \
    do {                                                                                           \
        if (!strstr((doc), (text)))                                                                \
            UNIT_FAIL("no %s in the document:\n%s", #text, (doc));                                 \
    } while (0)

static void parse(struct config *cfg)
{
    optind = 0;
    cli_parse((int)(sizeof argv_run / sizeof argv_run[0]) - 1, argv_run, cfg);
}

TEST(an_empty_run_has_counts_of_zero_and_null_statistics)
{
    struct config cfg;
    parse(&cfg);
    struct result r = {.spec = &cfg.spec, .runtime_us = 3000000, .pipeline = 1};
    stats_init(&r.stats);
    char *doc = render(&r);
    CHECK_HAS(doc, "\"schema_version\": 1,");
    CHECK_HAS(doc,
              "\"headers\": [\n      [\n        \"X-A\",\n        \"\\\"q\\\"\"\n      ]\n    ]");
    CHECK_HAS(doc, "\"start_time\": \"1970-01-01T00:00:00.000Z\"");
    CHECK_HAS(doc, "\"ok\": 0,\n    \"attempts\": 0,\n    \"percent\": null");
    CHECK_HAS(doc, "\"status_codes\": {},");
    CHECK_HAS(doc, "\"latency\": {\n    \"count\": 0,\n    \"min\": null,");
    CHECK_HAS(doc, "\"100\": null\n    },\n    \"hdr_histogram\": \"HISTFAAA");
    CHECK_HAS(doc, "\"latency_uncorrected\": null,\n  \"scheduling_lag\": null,");
    CHECK_HAS(doc, "\"rate\": null,");
    CHECK_HAS(doc, "\"requests\": null,");
    free(doc);
    stats_free(&r.stats);
    cli_free(&cfg);
}

TEST(success_counts_socket_errors_as_failed_attempts)
{
    struct config cfg;
    parse(&cfg);
    struct result r = {.spec = &cfg.spec, .runtime_us = 1000000, .pipeline = 1};
    stats_init(&r.stats);
    r.stats.requests = 6;
    r.stats.status[200] = 3;
    r.stats.status[503] = 2;
    r.stats.status[0] = 1; /* a code past 999 */
    r.stats.errors.status = 3;
    r.stats.errors.connect = 1;
    r.stats.errors.timeout = 1;
    r.stats.causes[CAUSE_REFUSED] = 1;
    r.stats.causes[CAUSE_RESPONSE_TIMEOUT] = 1;
    for (uint64_t v = 1; v <= 6; v++)
        hist_record(r.stats.latency, v * 1000);
    char *doc = render(&r);
    CHECK_HAS(doc, "\"ok\": 3,\n    \"attempts\": 8,\n    \"percent\": 37.5\n");
    CHECK_HAS(doc, "\"status_codes\": {\n    \"200\": 3,\n    \"503\": 2,\n    \"other\": 1\n  }");
    CHECK_HAS(doc, "\"refused\": 1,");
    CHECK_HAS(doc, "\"response_timeout\": 1,");
    CHECK_HAS(doc, "\"min\": 1000,\n    \"max\": 6000,\n    \"mean\": 3500,");
    /* HdrHistogram reports the top of the value's bucket: 2 wide past 2048. */
    CHECK_HAS(doc, "\"50\": 3001,");
    CHECK_HAS(doc, "\"requests_per_sec\": 6,");
    free(doc);
    stats_free(&r.stats);
    cli_free(&cfg);
}

static char *warnings(const struct result *r)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    report_warnings(f, r);
    fclose(f);
    return out;
}

TEST(the_busiest_worker_thread_decides_saturation)
{
    struct config cfg;
    parse(&cfg); /* 2 threads */
    struct result r = {.spec = &cfg.spec, .runtime_us = 2000000};
    struct cpu_load load;

    /* 1.85 CPUs on average, but no thread over 90%: not saturated. */
    r.cpu.user_s = 2.0, r.cpu.system_s = 1.7, r.cpu.busiest = 0.9;
    report_cpu_load(&r, &load);
    CHECK(load.cpus >= 1);
    CHECK_DBL(load.utilisation, 0.925, 1e-9);
    CHECK(!load.saturated);
    char *out = warnings(&r);
    CHECK_STR(out, "");
    free(out);

    /* One thread busy (or waiting for a CPU) 96.6% of the time. */
    r.cpu.user_s = 0.5, r.cpu.system_s = 0.1, r.cpu.busiest = 0.966;
    report_cpu_load(&r, &load);
    CHECK_DBL(load.utilisation, 0.15, 1e-9);
    CHECK(load.saturated);
    out = warnings(&r);
    CHECK_STR(out, "Warning: volley was CPU-bound (a thread was busy 97% of the time): these "
                   "figures measure the load generator, not only the server\n");
    free(out);

    stats_init(&r.stats);
    char *doc = render(&r);
    stats_free(&r.stats);
    CHECK_HAS(doc, "\"busiest_thread\": 0.966,\n    \"saturated\": true\n");
    CHECK_HAS(doc, "\"run_queue_wait_s\": null,");
    free(doc);
    cli_free(&cfg);
}
