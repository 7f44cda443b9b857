/* The run description: copying and freeing it, its headers, and what it
 * derives from what was asked (a shard's shares, the stages' mean rate),
 * the same whether the command line or volley merge filled it.
 * SPDX-License-Identifier: MIT */
#include "spec.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "profile.h"
#include "xalloc.h"

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

void spec_copy(struct run_spec *dst, const struct run_spec *src)
{
    *dst = *src;
    dst->url = dup_or_null(src->url);
    dst->unix_socket = dup_or_null(src->unix_socket);
    dst->script = dup_or_null(src->script);
    dst->timeline = dup_or_null(src->timeline);
    dst->hdr_log = dup_or_null(src->hdr_log);
    dst->stages = xcalloc(src->nstages + 1, sizeof *dst->stages);
    if (src->nstages) /* memcpy from NULL is undefined, even for 0 bytes */
        memcpy(dst->stages, src->stages, src->nstages * sizeof *dst->stages);
    dst->script_args = xcalloc(src->nscript_args + 1, sizeof *dst->script_args);
    for (size_t i = 0; i < src->nscript_args; i++)
        dst->script_args[i] = xstrdup(src->script_args[i]);
    dst->labels = xcalloc(src->nlabels + 1, sizeof *dst->labels);
    for (size_t i = 0; i < src->nlabels; i++)
        dst->labels[i] =
            (struct label){xstrdup(src->labels[i].name), xstrdup(src->labels[i].value)};
    dst->buckets = xcalloc(src->nbuckets + 1, sizeof *dst->buckets);
    if (src->nbuckets)
        memcpy(dst->buckets, src->buckets, src->nbuckets * sizeof *dst->buckets);
    dst->headers = xcalloc(src->nheaders + 1, sizeof *dst->headers);
    for (size_t i = 0; i < src->nheaders; i++)
        dst->headers[i] =
            (struct header){xstrdup(src->headers[i].name), xstrdup(src->headers[i].value)};
}

void spec_free(struct run_spec *spec)
{
    for (size_t i = 0; i < spec->nheaders; i++) {
        free(spec->headers[i].name);
        free(spec->headers[i].value);
    }
    free(spec->headers);
    for (size_t i = 0; i < spec->nlabels; i++) {
        free(spec->labels[i].name);
        free(spec->labels[i].value);
    }
    free(spec->labels);
    free(spec->buckets);
    for (size_t i = 0; i < spec->nscript_args; i++)
        free(spec->script_args[i]);
    free(spec->script_args);
    free(spec->stages);
    free(spec->url);
    free(spec->unix_socket);
    free(spec->script);
    free(spec->timeline);
    free(spec->hdr_log);
    memset(spec, 0, sizeof *spec);
}

const struct header *spec_header(const struct run_spec *spec, const char *name)
{
    for (size_t i = 0; i < spec->nheaders; i++)
        if (strcasecmp(spec->headers[i].name, name) == 0)
            return &spec->headers[i];
    return NULL;
}

void spec_set_header(struct run_spec *spec, const char *name, size_t name_len, const char *value,
                     size_t value_len)
{
    char *n = xstrndup(name, name_len);
    struct header *h = (struct header *)spec_header(spec, n);
    if (h) {
        free(h->name);
        free(h->value);
    } else {
        spec->headers = xrealloc(spec->headers, (spec->nheaders + 1) * sizeof *spec->headers);
        h = &spec->headers[spec->nheaders++];
    }
    h->name = n;
    h->value = xstrndup(value, value_len);
}

static bool fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

/* Share i of n of total: total / n each, the first total % n one more. */
static uint64_t share(uint64_t total, uint64_t n, uint64_t i)
{
    return total / n + (i < total % n ? 1 : 0);
}

bool spec_shard_shares(struct run_spec *spec, char *err, size_t errlen)
{
    struct shard *s = &spec->shard;
    uint64_t n = s->count ? s->count : 1, i = s->index;
    if (s->count && i >= n)
        return fail(err, errlen,
                    "invalid shard %" PRIu64 "/%" PRIu64 ": shards count from 0 to %" PRIu64, i, n,
                    n - 1);
    if (n > spec->connections)
        return fail(err, errlen,
                    "%" PRIu64 " shards need at least as many connections (-c %" PRIu64 ")", n,
                    spec->connections);
    if (spec->requests && n > spec->requests)
        return fail(err, errlen,
                    "%" PRIu64 " shards need at least as many requests (-n %" PRIu64 ")", n,
                    spec->requests);
    s->connections = share(spec->connections, n, i);
    s->first_conn =
        i * (spec->connections / n) + (i < spec->connections % n ? i : spec->connections % n);
    s->requests = spec->requests ? share(spec->requests, n, i) : 0;
    /* Every connection sends at the same pace, so the rate divides as they do. */
    s->rate = (double)spec->rate * (double)s->connections / (double)spec->connections;
    /* A shard may have fewer connections than -t threads: a thread needs one. */
    if (spec->threads > s->connections)
        spec->threads = s->connections;
    return true;
}

bool spec_stage_rates(struct run_spec *spec, char *err, size_t errlen)
{
    struct profile p;
    uint64_t total_us = 0;
    profile_init(&p, (double)spec->rate);
    for (size_t i = 0; i < spec->nstages; i++) {
        if (spec->stages[i].duration_us > UINT64_MAX - total_us) {
            profile_free(&p);
            return fail(err, errlen, "--stages: too long");
        }
        total_us += spec->stages[i].duration_us;
        profile_add(&p, (double)spec->stages[i].duration_us, (double)spec->stages[i].rate);
    }
    double requests = profile_requests(&p, (double)total_us);
    profile_free(&p);
    if (total_us == 0)
        return fail(err, errlen, "--stages: the stages last no time");
    if (requests < 1)
        return fail(err, errlen, "--stages: the stages send no request");
    spec->stages_from = spec->rate;
    spec->rate = (uint64_t)llround(requests * 1e6 / (double)total_us);
    if (spec->rate == 0)
        spec->rate = 1;
    spec->duration_us = total_us;
    return true;
}

void spec_profile(const struct run_spec *spec, struct profile *p)
{
    double from = (double)(spec->nstages ? spec->stages_from : spec->rate);
    profile_init(p, from);
    if (spec->warmup_us)
        profile_add(p, (double)spec->warmup_us, from);
    for (size_t i = 0; i < spec->nstages; i++)
        profile_add(p, (double)spec->stages[i].duration_us, (double)spec->stages[i].rate);
    if (!spec->nstages)
        profile_add(p, INFINITY, (double)spec->rate);
}
