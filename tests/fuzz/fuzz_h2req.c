/* Fuzz target for the HTTP/2 conversion of request bytes (src/h2req.c, over
 * http_request_next in src/http.c): whatever request_set accepts either
 * converts or is refused with one line. A conversion has one message per
 * request, each with the four pseudo-header fields first and in order, then
 * fields HTTP/2 allows (lower-case names, no connection-specific field, TE
 * only "trailers", nothing nghttp2's own checks refuse), at most one
 * Content-Length, which matches the body; and the same bytes converted
 * again into the same h2req give the same result.
 * SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "h2req.h"
#include "http_request.h"
#include "request.h"

static bool name_is(const nghttp2_nv *nv, const char *name)
{
    return nv->namelen == strlen(name) && memcmp(nv->name, name, nv->namelen) == 0;
}

static bool value_is(const nghttp2_nv *nv, const char *value)
{
    return nv->valuelen == strlen(value) && memcmp(nv->value, value, nv->valuelen) == 0;
}

static void check_field(const nghttp2_nv *nv, const struct h2req_msg *m, size_t *lengths)
{
    static const char *const banned[] = {"connection",        "keep-alive", "proxy-connection",
                                         "transfer-encoding", "upgrade",    "host"};
    FUZZ_CHECK(nv->namelen > 0 && nv->name[0] != ':');
    FUZZ_CHECK(nghttp2_check_header_name(nv->name, nv->namelen));
    FUZZ_CHECK(nghttp2_check_header_value_rfc9113(nv->value, nv->valuelen));
    for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
        FUZZ_CHECK(!name_is(nv, banned[i]));
    if (name_is(nv, "te"))
        FUZZ_CHECK(value_is(nv, "trailers"));
    if (name_is(nv, "content-length")) {
        size_t n = 0;
        for (size_t i = 0; i < nv->valuelen; i++) {
            FUZZ_CHECK(nv->value[i] >= '0' && nv->value[i] <= '9');
            n = n * 10 + (size_t)(nv->value[i] - '0');
        }
        FUZZ_CHECK(nv->valuelen > 0 && n == m->body_len);
        (*lengths)++;
    }
}

static void check_msg(const struct h2req_msg *m)
{
    static const char *const pseudo[] = {":method", ":scheme", ":authority", ":path"};
    size_t lengths = 0;
    FUZZ_CHECK(m->nvlen >= 4);
    for (size_t i = 0; i < 4; i++) {
        FUZZ_CHECK(name_is(&m->nv[i], pseudo[i]));
        FUZZ_CHECK(m->nv[i].valuelen > 0);
        FUZZ_CHECK(nghttp2_check_header_value_rfc9113(m->nv[i].value, m->nv[i].valuelen));
    }
    FUZZ_CHECK(nghttp2_check_method(m->nv[0].value, m->nv[0].valuelen));
    FUZZ_CHECK(value_is(&m->nv[1], "http") || value_is(&m->nv[1], "https"));
    FUZZ_CHECK(nghttp2_check_authority(m->nv[2].value, m->nv[2].valuelen));
    FUZZ_CHECK(nghttp2_check_path(m->nv[3].value, m->nv[3].valuelen));
    FUZZ_CHECK(m->nv[3].value[0] == '/' || value_is(&m->nv[3], "*"));
    FUZZ_CHECK(m->head == value_is(&m->nv[0], "HEAD"));
    for (size_t i = 4; i < m->nvlen; i++)
        check_field(&m->nv[i], m, &lengths);
    FUZZ_CHECK(lengths <= 1 && (lengths == 1 || m->body_len == 0));
    FUZZ_CHECK((m->body != NULL) == (m->body_len > 0));
}

/* Two conversions of the same bytes hold the same fields and bodies. */
static bool same(const struct h2req *a, const struct h2req *b)
{
    if (a->count != b->count)
        return false;
    for (size_t i = 0; i < a->count; i++) {
        const struct h2req_msg *x = &a->msgs[i], *y = &b->msgs[i];
        if (x->nvlen != y->nvlen || x->body_len != y->body_len || x->head != y->head ||
            (x->body_len && memcmp(x->body, y->body, x->body_len) != 0))
            return false;
        for (size_t k = 0; k < x->nvlen; k++)
            if (x->nv[k].namelen != y->nv[k].namelen || x->nv[k].valuelen != y->nv[k].valuelen ||
                memcmp(x->nv[k].name, y->nv[k].name, x->nv[k].namelen) != 0 ||
                (x->nv[k].valuelen &&
                 memcmp(x->nv[k].value, y->nv[k].value, x->nv[k].valuelen) != 0))
                return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct request r = {0};
    char err[256];
    char *copy = malloc(size + 1);
    FUZZ_CHECK(copy);
    memcpy(copy, data, size);
    copy[size] = '\0';
    if (!request_set(&r, copy, size, err, sizeof err))
        return 0;
    /* The first byte picks the scheme, so both are covered. */
    bool tls = size > 0 && (data[0] & 1);
    struct h2req h = {0}, again = {0};
    memset(err, 'x', sizeof err);
    bool ok = h2req_build(&h, &r, tls, err, sizeof err);
    if (ok) {
        FUZZ_CHECK(h.count == r.depth);
        for (size_t i = 0; i < h.count; i++)
            check_msg(&h.msgs[i]);
        FUZZ_CHECK(h2req_build(&again, &r, tls, err, sizeof err) && same(&h, &again));
        /* Rebuilt in place, over its own earlier storage. */
        FUZZ_CHECK(h2req_build(&h, &r, tls, err, sizeof err) && same(&h, &again));
    } else {
        FUZZ_CHECK(memchr(err, '\0', sizeof err) && err[0] && !strchr(err, '\n'));
        FUZZ_CHECK(h.count == 0);
    }
    h2req_free(&h);
    h2req_free(&again);
    request_free(&r);
    return 0;
}
