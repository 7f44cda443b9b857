/* Fuzz target for volley's HTTP/2 session (src/h2.c) over libnghttp2: the
 * input is what a server sends. Whatever it is, every request submitted ends
 * at most once (answered, failed on its own, or handed back to be sent
 * again), the requests in flight are exactly those that have not ended, the
 * response() hook is given whole "name: value" lines, and a connection that
 * fails or closes ends with every request accounted for.
 *
 * Input: byte 0 picks -m (1 to 8) and whether the hook wants headers and
 * body, byte 1 the request (a GET, or a POST with a body, from the static
 * request or from request()'s buffer) and byte 2 the size of the pieces the
 * rest is fed in (1 to 64 bytes); the rest is the server's bytes.
 * SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <string.h>

#include "conn.h"
#include "fuzz.h"
#include "http.h"
#include "request.h"
#include "xalloc.h"

/* The connection's side of the protocol layer, counting outcomes. */
static struct {
    size_t answered, failed, returned;
} out;

bool conn_response(struct conn *c, const struct proto_response *r, uint64_t start_at,
                   uint64_t sent_at, uint64_t now)
{
    (void)start_at, (void)sent_at, (void)now;
    const char *name, *value;
    size_t pos = 0, name_len, value_len, lines = 0;
    out.answered++;
    FUZZ_CHECK(r->lower_case);
    if (c->env->want_head && r->fields_len) {
        FUZZ_CHECK(r->fields_len >= 4 && memcmp(r->fields + r->fields_len - 2, "\r\n", 2) == 0);
        for (size_t i = 0; i < r->fields_len; i++)
            lines += r->fields[i] == '\n';
        size_t found = 0;
        while (
            http_field_next(r->fields, r->fields_len, &pos, &name, &name_len, &value, &value_len))
            found++;
        /* Every line is one field; none breaks another in two. */
        FUZZ_CHECK(found == lines);
    }
    if (!c->env->want_head)
        FUZZ_CHECK(r->fields_len == 0);
    if (!c->env->want_body)
        FUZZ_CHECK(r->body_len == 0);
    return true;
}

void conn_requests_returned(struct conn *c, size_t n)
{
    (void)c;
    out.returned += n;
}

void conn_request_failed(struct conn *c, enum cause cause)
{
    (void)c;
    FUZZ_CHECK(cause < CAUSE_COUNT);
    out.failed++;
}

static const struct request *the_request(struct conn *c, struct request *shared, bool post)
{
    static const char get[] = "GET /f HTTP/1.1\r\nHost: fuzz\r\n\r\n";
    static const char body[] = "POST /f HTTP/1.1\r\nHost: fuzz\r\nContent-Length: 20000\r\n\r\n";
    char err[128];
    size_t len = post ? sizeof body - 1 + 20000 : sizeof get - 1;
    char *data = xmalloc(len + 1);
    memcpy(data, post ? body : get, post ? sizeof body - 1 : sizeof get - 1);
    if (post)
        memset(data + sizeof body - 1, 'b', 20000);
    data[len] = '\0';
    FUZZ_CHECK(request_set(shared, data, len, err, sizeof err));
    (void)c;
    return shared;
}

/* Write all the session has to say. */
static void drain(struct conn *c)
{
    const char *data;
    size_t n;
    while ((n = proto_h2.output(c, &data)) > 0)
        proto_h2.wrote(c, n);
}

static size_t submitted;

static void check_accounts(struct conn *c)
{
    FUZZ_CHECK(out.answered + out.failed + out.returned + proto_h2.inflight(c) == submitted);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    struct stats stats;
    memset(&stats, 0, sizeof stats);
    struct conn_env env = {
        .proto = &proto_h2,
        .stats = &stats,
        .streams = 1 + (data[0] & 7),
        .want_head = data[0] & 8,
        .want_body = data[0] & 16,
        .depth = 1,
    };
    struct conn c = {.env = &env};
    struct request shared = {0};
    bool post = data[1] & 1, own = data[1] & 2;
    size_t piece = 1 + data[2] % 64;
    memset(&out, 0, sizeof out);
    submitted = 0;

    c.session = proto_h2.new(&c);
    proto_h2.open(&c);
    const struct request *r = the_request(&c, own ? &c.own : &shared, post);
    enum proto_status st = PROTO_OK;
    enum cause cause;
    for (size_t off = 3; off < size && st == PROTO_OK; off += piece) {
        /* At most 64 requests in all, as many as may go at once. */
        while (submitted < 64 && proto_h2.ready(&c)) {
            proto_h2.submit(&c, r, 1, 1, 0);
            submitted++;
        }
        drain(&c);
        size_t n = size - off < piece ? size - off : piece;
        st = proto_h2.input(&c, (const char *)data + off, n, 2, &cause);
        check_accounts(&c);
        if (st == PROTO_FAIL)
            FUZZ_CHECK(cause < CAUSE_COUNT);
    }
    if (st == PROTO_OK) {
        drain(&c);
        st = proto_h2.eof(&c, 3, &cause);
        FUZZ_CHECK(st == PROTO_CLOSE ? proto_h2.inflight(&c) == 0 : cause < CAUSE_COUNT);
        if (st == PROTO_FAIL)
            (void)proto_h2.expired(&c);
    }
    check_accounts(&c);
    FUZZ_CHECK(stats.h2_refused <= out.returned);
    proto_h2.abort(&c);
    FUZZ_CHECK(proto_h2.inflight(&c) == 0 && proto_h2.oldest(&c) == 0);
    proto_h2.free(c.session);
    request_free(&shared);
    request_free(&c.own);
    return 0;
}
