/* The run description: copying and freeing it, its headers, and what it
 * derives from what was asked (a shard's shares, the stages' mean rate),
 * the same whether the command line or volley merge filled it.
 * SPDX-License-Identifier: MIT */
#include "spec.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"
#include "profile.h"
#include "protocols.h"
#include "xalloc.h"

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

void spec_copy(struct run_spec *dst, const struct run_spec *src)
{
    *dst = *src;
    dst->url = dup_or_null(src->url);
    dst->unix_socket = dup_or_null(src->unix_socket);
    dst->proxy = dup_or_null(src->proxy);
    dst->bind = dup_or_null(src->bind);
    dst->bind_ports = dup_or_null(src->bind_ports);
    dst->script = dup_or_null(src->script);
    dst->timeline = dup_or_null(src->timeline);
    dst->hdr_log = dup_or_null(src->hdr_log);
    dst->stages = xcalloc(src->nstages + 1, sizeof *dst->stages);
    if (src->nstages) /* no --stages: src->stages may be NULL, which memcpy may not take */
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
    free(spec->proxy);
    free(spec->bind);
    free(spec->bind_ports);
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

/* --stages as given; rate is then their mean target, and stages_from the
 * rate they start from. */
static void stages(struct json *j, const struct run_spec *spec)
{
    if (!spec->nstages) {
        json_null(j, "stages");
        json_null(j, "stages_from");
        return;
    }
    json_array_begin(j, "stages");
    for (size_t i = 0; i < spec->nstages; i++) {
        json_object_begin(j, NULL);
        json_uint(j, "duration_us", spec->stages[i].duration_us);
        json_uint(j, "rate", spec->stages[i].rate);
        json_object_end(j);
    }
    json_array_end(j);
    json_uint(j, "stages_from", spec->stages_from);
}

void spec_json(struct json *j, const struct run_spec *spec, size_t pipeline)
{
    json_object_begin(j, "options");
    json_string(j, "url", spec->url);
    json_uint(j, "threads", spec->threads);
    json_uint(j, "connections", spec->connections);
    json_uint_or_null(j, "duration_us", spec->time_limit_us);
    json_uint(j, "timeout_us", spec->timeout_us);
    json_uint_or_null(j, "rate", spec->rate);
    json_uint_or_null(j, "requests", spec->requests);
    stages(j, spec);
    json_uint_or_null(j, "ramp_up_us", spec->ramp_up_us);
    json_uint_or_null(j, "warmup_us", spec->warmup_us);
    json_uint(j, "pipeline", pipeline);
    json_string(j, "protocol", spec_protocol(spec));
    /* over TLS, the protocols offered */
    if (spec->tls) {
        json_array_begin(j, "alpn");
        for (size_t i = 0; i < spec->nprotocols; i++)
            json_string(j, NULL, spec->protocols[i]->alpn);
        json_array_end(j);
    } else {
        json_null(j, "alpn");
    }
    json_uint(j, "streams", spec->streams);
    json_bool(j, "keepalive", !spec->no_keepalive);
    json_string(j, "unix_socket", spec->unix_socket);
    json_string(j, "engine", spec_engine_name(spec->engine));
    json_string(j, "proxy", spec->proxy);
    json_string(j, "bind", spec->bind);
    json_string(j, "bind_port_range", spec->bind_ports);
    json_string(j, "script", spec->script);
    json_array_begin(j, "script_args");
    for (size_t i = 0; i < spec->nscript_args; i++)
        json_string(j, NULL, spec->script_args[i]);
    json_array_end(j);
    json_array_begin(j, "headers");
    for (size_t i = 0; i < spec->nheaders; i++) {
        json_array_begin(j, NULL);
        json_string(j, NULL, spec->headers[i].name);
        json_string(j, NULL, spec->headers[i].value);
        json_array_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

static const char *const engine_names[] = {
    [SPEC_ENGINE_AUTO] = "auto",
    [SPEC_ENGINE_EPOLL] = "epoll",
    [SPEC_ENGINE_IO_URING] = "io_uring",
};

const char *spec_engine_name(enum spec_engine engine)
{
    return engine == SPEC_ENGINE_AUTO ? NULL : engine_names[engine];
}

bool spec_set_engine(struct run_spec *spec, const char *name)
{
    for (size_t i = 0; i < sizeof engine_names / sizeof *engine_names; i++) {
        if (strcmp(name, engine_names[i]) == 0) {
            spec->engine = (enum spec_engine)i;
            return true;
        }
    }
    return false;
}

bool spec_offers(const struct run_spec *spec, const struct proto_ops *p)
{
    for (size_t i = 0; i < spec->nprotocols; i++)
        if (spec->protocols[i] == p)
            return true;
    return false;
}

bool spec_offers_figures(const struct run_spec *spec, enum stats_place place)
{
    for (size_t i = 0; i < spec->nprotocols; i++)
        if (spec->protocols[i]->figures == place)
            return true;
    return false;
}

bool spec_quic(const struct run_spec *spec)
{
    return spec->nprotocols && spec->protocols[0]->transport;
}

const struct proto_ops *spec_only_protocol(const struct run_spec *spec)
{
    return spec->nprotocols == 1 ? spec->protocols[0] : NULL;
}

const char *spec_protocol(const struct run_spec *spec)
{
    return spec->nprotocols == 1 ? spec->protocols[0]->name : NULL;
}

char *spec_protocols_text(const struct run_spec *spec, bool alpn, const char *sep, char *buf,
                          size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < spec->nprotocols && len < size; i++) {
        const struct proto_ops *p = spec->protocols[i];
        int n = snprintf(buf + len, size - len, "%s%s", i ? sep : "", alpn ? p->alpn : p->name);
        len += n > 0 ? (size_t)n : 0;
    }
    return buf;
}

bool spec_same_protocols(const struct run_spec *a, const struct run_spec *b)
{
    return a->nprotocols == b->nprotocols &&
           memcmp(a->protocols, b->protocols, a->nprotocols * sizeof a->protocols[0]) == 0;
}

bool spec_set_protocols(struct run_spec *spec, const char *const *list, size_t n, bool alpn)
{
    spec->nprotocols = 0;
    if (n == 0 || n > PROTOCOLS_COUNT)
        return false;
    for (size_t i = 0; i < n; i++) {
        const struct proto_ops *p =
            alpn ? protocols_by_alpn(list[i], strlen(list[i])) : protocols_by_name(list[i]);
        if (!p || spec_offers(spec, p))
            return false;
        spec->protocols[spec->nprotocols++] = p;
    }
    return true;
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
        return xfail(err, errlen,
                     "invalid shard %" PRIu64 "/%" PRIu64 ": shards count from 0 to %" PRIu64, i, n,
                     n - 1);
    if (n > spec->connections)
        return xfail(err, errlen,
                     "%" PRIu64 " shards need at least as many connections (-c %" PRIu64 ")", n,
                     spec->connections);
    if (spec->requests && n > spec->requests)
        return xfail(err, errlen,
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
            return xfail(err, errlen, "--stages: too long");
        }
        total_us += spec->stages[i].duration_us;
        profile_add(&p, (double)spec->stages[i].duration_us, (double)spec->stages[i].rate);
    }
    double requests = profile_requests(&p, (double)total_us);
    profile_free(&p);
    if (total_us == 0)
        return xfail(err, errlen, "--stages: the stages last no time");
    if (requests < 1)
        return xfail(err, errlen, "--stages: the stages send no request");
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

/* Connection i of thread t of T in shard s of S has place (i T + t) S + s:
 * consecutive turns go round the shards and, within each, round its
 * threads, so that each sends its share of the rate all through the run
 * (numbered shard after shard, a shard's connections had their turns one
 * after the other: with -c 150000 -R 3000 in 8 shards, each sent at 3000/s
 * for 6 s and then nothing for 44). Shards and threads take their shares
 * with the larger ones first, so the places are 0 to C - 1, once each. */
void spec_turns(const struct run_spec *spec, size_t thread, uint64_t *first, uint64_t *stride)
{
    uint64_t shards = spec->shard.count ? spec->shard.count : 1;
    *first = thread * shards + spec->shard.index;
    *stride = spec->threads * shards;
}

double spec_rate_share(const struct run_spec *spec)
{
    return (double)spec->shard.connections / (double)spec->connections;
}
