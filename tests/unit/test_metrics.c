/* Unit tests for what the live metrics write and read by hand: remote
 * write's protobuf encoding, decoded here by an independent reader of the
 * wire format, and the --metrics-listen address forms.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include "buf.h"
#include "net.h"
#include "remote_write.h"

/* ---- a protobuf reader, written independently of remote_write.c ------------- */

struct pb {
    const unsigned char *p, *end;
};

static uint64_t pb_uvarint(struct pb *r)
{
    uint64_t v = 0;
    for (int shift = 0; r->p < r->end; shift += 7) {
        unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    UNIT_FAIL("truncated varint");
    return 0;
}

/* The next field: its number and wire type; a length-delimited one's body. */
static bool pb_next(struct pb *r, unsigned *field, unsigned *wire, struct pb *body)
{
    if (r->p >= r->end)
        return false;
    uint64_t key = pb_uvarint(r);
    *field = (unsigned)(key >> 3);
    *wire = (unsigned)(key & 7);
    if (*wire == 2) {
        uint64_t len = pb_uvarint(r);
        CHECK(len <= (uint64_t)(r->end - r->p));
        *body = (struct pb){r->p, r->p + len};
        r->p += len;
    }
    return true;
}

TEST(a_series_is_a_timeseries_of_sorted_labels_and_one_sample)
{
    struct buf req = {0};
    const char *names[] = {"url", "__name__", "status", "Zone"};
    const char *values[] = {"http://x/", "volley_responses_total", "200", "é"};
    remote_write_series(&req, names, values, 4, 1234.5, 1795703527015LL);
    remote_write_series(&req, names, values, 2, -0.25, 1);
    struct pb w = {(const unsigned char *)req.data, (const unsigned char *)req.data + req.len};
    struct pb ts, part, label;
    unsigned field, wire, nseries = 0;
    while (pb_next(&w, &field, &wire, &ts)) {
        CHECK(field == 1 && wire == 2); /* WriteRequest.timeseries */
        char last[64] = "";
        unsigned nlabels = 0, nsamples = 0;
        while (pb_next(&ts, &field, &wire, &part)) {
            CHECK(wire == 2);
            if (field == 1) { /* Label */
                char name[64] = "", value[64] = "";
                unsigned f2, w2;
                while (pb_next(&part, &f2, &w2, &label)) {
                    size_t len = (size_t)(label.end - label.p);
                    CHECK(w2 == 2 && len < 64);
                    memcpy(f2 == 1 ? name : value, label.p, len);
                }
                CHECK(strcmp(last, name) < 0); /* sorted, byte by byte */
                for (int i = 0; i < 4; i++)
                    if (strcmp(names[i], name) == 0)
                        CHECK_STR(value, values[i]);
                memcpy(last, name, sizeof last);
                nlabels++;
            } else { /* Sample */
                unsigned f2, w2;
                struct pb none;
                CHECK(field == 2);
                CHECK(pb_next(&part, &f2, &w2, &none) && f2 == 1 && w2 == 1);
                uint64_t bits = 0;
                for (int i = 0; i < 8; i++)
                    bits |= (uint64_t)part.p[i] << (8 * i);
                part.p += 8;
                double v;
                memcpy(&v, &bits, sizeof v);
                CHECK_DBL(v, nseries == 0 ? 1234.5 : -0.25, 0);
                CHECK(pb_next(&part, &f2, &w2, &none) && f2 == 2 && w2 == 0);
                CHECK_I64((int64_t)pb_uvarint(&part), nseries == 0 ? 1795703527015LL : 1);
                nsamples++;
            }
        }
        CHECK_U64(nlabels, nseries == 0 ? 4 : 2);
        CHECK_U64(nsamples, 1);
        nseries++;
    }
    CHECK_U64(nseries, 2);
    buf_free(&req);
}

static void check_listen(const char *s, const char *host, const char *port)
{
    char *h = NULL, *p = NULL;
    const char *why = NULL;
    bool ok = net_parse_listen(s, &h, &p, &why);
    if (!port) {
        if (ok)
            UNIT_FAIL("'%s' parsed", s);
        CHECK(ok || why);
    } else if (!ok) {
        UNIT_FAIL("'%s': %s", s, why);
    } else {
        CHECK(host ? h && strcmp(h, host) == 0 : h == NULL);
        CHECK_STR(p, port);
    }
    free(h);
    free(p);
}

TEST(listen_addresses_take_the_three_forms)
{
    check_listen("127.0.0.1:9465", "127.0.0.1", "9465");
    check_listen("[::1]:9465", "::1", "9465");
    check_listen(":9465", NULL, "9465");
    check_listen("localhost:1", "localhost", "1");
    check_listen("[fe80::1%lo]:65535", "fe80::1%lo", "65535");
    check_listen("9465", NULL, NULL);
    check_listen("::1:9465", NULL, NULL);
    check_listen("[::1:9465", NULL, NULL);
    check_listen("[]:9465", NULL, NULL);
    check_listen("host:0", NULL, NULL);
    check_listen("host:65536", NULL, NULL);
    check_listen("host:12a", NULL, NULL);
    check_listen("host:", NULL, NULL);
    check_listen("host:+80", NULL, NULL);
}
