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

#include "fuzz.h"
#include "h2.h"
#include "http.h"
#include "proto.h"
#include "request.h"
#include "xalloc.h"

/* The session's sink: the connection's side of the protocol layer, played
 * here, counting outcomes. */
static struct {
    size_t answered, failed, returned;
    const struct proto_wants *wants;
} out;

static bool on_response(void *arg, const struct proto_response *r)
{
    (void)arg;
    const char *name, *value;
    size_t pos = 0, name_len, value_len, lines = 0;
    out.answered++;
    FUZZ_CHECK(r->lower_case);
    if (out.wants->head && r->fields_len) {
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
    if (!out.wants->head)
        FUZZ_CHECK(r->fields_len == 0);
    if (!out.wants->body)
        FUZZ_CHECK(r->body_len == 0);
    FUZZ_CHECK(r->body_len <= HTTP_MAX_BODY && r->fields_len <= HTTP_MAX_HEAD);
    return true;
}

static void on_returned(void *arg, size_t n)
{
    (void)arg;
    out.returned += n;
}

static void on_failed(void *arg, enum cause cause)
{
    (void)arg;
    FUZZ_CHECK(cause < CAUSE_COUNT);
    out.failed++;
}

static void on_unsent(void *arg, enum cause cause) { on_failed(arg, cause); }

/* The connection decides whether a refused request goes again; either way
 * the session is done with it. */
static void on_refused(void *arg) { on_returned(arg, 1); }

static const struct request *the_request(struct request *r, bool post)
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
    FUZZ_CHECK(request_set(r, data, len, err, sizeof err));
    return r;
}

/* Write all the session has to say. */
static void drain(struct proto_session *session)
{
    const char *data;
    size_t n;
    while ((n = proto_h2.output(session, &data)) > 0)
        proto_h2.wrote(session, n);
}

static size_t submitted;

static void check_accounts(struct proto_session *session)
{
    FUZZ_CHECK(out.answered + out.failed + out.returned + proto_h2.inflight(session) == submitted);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    struct stats stats; /* its counters, without histograms: none is recorded */
    memset(&stats, 0, sizeof stats);
    struct proto_wants wants = {.head = data[0] & 8, .body = data[0] & 16};
    const struct proto_conf conf = {
        .stats = &stats,
        .streams = 1 + (data[0] & 7),
        .depth = 1,
        .wants = &wants,
    };
    const struct proto_sink sink = {on_response, on_failed, on_unsent, on_refused, on_returned};
    struct request r = {0};
    /* request()'s buffer (own), which the next batch may refill, or the
     * static request */
    bool post = data[1] & 1, own = data[1] & 2;
    size_t piece = 1 + data[2] % 64;
    memset(&out, 0, sizeof out);
    out.wants = &wants;
    submitted = 0;

    struct proto_session *session = proto_h2.create(&conf, &sink, NULL);
    proto_h2.open(session, NULL);
    the_request(&r, post);
    enum proto_status st = PROTO_OK;
    enum cause cause;
    for (size_t off = 3; off < size && st == PROTO_OK; off += piece) {
        /* At most 64 requests in all, as many as may go at once. */
        while (submitted < 64 && proto_h2.ready(session)) {
            proto_h2.submit(session, &r, own, 1, 1, 0);
            submitted++;
        }
        drain(session);
        size_t n = size - off < piece ? size - off : piece;
        st = proto_h2.input(session, (const char *)data + off, n, 2, &cause);
        check_accounts(session);
        if (st == PROTO_FAIL)
            FUZZ_CHECK(cause < CAUSE_COUNT);
    }
    if (st == PROTO_OK) {
        drain(session);
        st = proto_h2.eof(session, 3, &cause);
        FUZZ_CHECK(st == PROTO_CLOSE ? proto_h2.inflight(session) == 0 : cause < CAUSE_COUNT);
        if (st == PROTO_FAIL)
            (void)proto_h2.expired(session);
    }
    check_accounts(session);
    FUZZ_CHECK(stats.h2_refused <= out.returned);
    proto_h2.abort(session);
    FUZZ_CHECK(proto_h2.inflight(session) == 0 && proto_h2.oldest(session) == 0);
    proto_h2.destroy(session);
    request_free(&r);
    return 0;
}
