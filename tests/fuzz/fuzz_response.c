/* Fuzz target for the response framing (src/http.c): one byte stream of
 * pipelined responses is fed to the parser the way a connection does, three
 * times: whole, in pieces of pseudo-random sizes, and one byte at a time.
 * Every feeding must see the same responses (status, keep-alive, where each
 * ended, the head and body kept) and the same error, whatever the split; the
 * results must be self-consistent (used counts, repeated calls after the end,
 * heads that iterate cleanly).
 *
 * Input: byte 0 = options (bit 0 want_head, bit 1 want_body), byte 1 = which
 * of the first 8 responses answer a HEAD request, bytes 2-3 = seed of the
 * piece sizes, then the stream.
 * SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "http.h"

#define MAX_EVENTS 64

enum kind { EV_DONE, EV_ERROR, EV_EOF_MORE, EV_EOF_DONE };

struct event {
    enum kind kind;
    int status;
    bool keep_alive;
    enum http_error error;
    size_t end; /* stream offset just past a response (EV_DONE) */
    uint64_t head_hash, body_hash;
    size_t head_len, body_len;
};

struct trace {
    size_t n;
    struct event ev[MAX_EVENTS];
};

struct input {
    const uint8_t *stream;
    size_t len;
    bool want_head, want_body;
    uint8_t heads;
    uint32_t seed;
};

static uint64_t hash(const struct buf *b)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < b->len; i++)
        h = (h ^ (uint8_t)b->data[i]) * 1099511628211ULL;
    return h;
}

static bool is_head(const struct input *in, size_t k) { return k < 8 && (in->heads >> k & 1); }

/* What a kept head must look like: a status line, field lines that iterate
 * to the end, a blank line. */
static void check_head(const struct http_parser *p)
{
    const struct buf *h = &p->head;
    FUZZ_CHECK(h->len >= 14 && memcmp(h->data, "HTTP/1.", 7) == 0);
    FUZZ_CHECK(h->data[h->len - 1] == '\n');
    size_t len, pos = 0, name_len, value_len, fields = 0;
    const char *lines, *name, *value;
    http_head_fields(h, &lines, &len);
    while (http_field_next(lines, len, &pos, &name, &name_len, &value, &value_len)) {
        FUZZ_CHECK(name_len > 0 && !memchr(name, ':', name_len) && !memchr(name, '\n', name_len));
        FUZZ_CHECK(value >= h->data && value + value_len <= h->data + h->len);
        FUZZ_CHECK(!memchr(value, '\n', value_len));
        FUZZ_CHECK(++fields <= h->len);
    }
    FUZZ_CHECK(lines + pos == h->data + h->len);
}

static void record(struct trace *t, enum kind kind, const struct http_parser *p, size_t end)
{
    FUZZ_CHECK(t->n < MAX_EVENTS);
    struct event *e = &t->ev[t->n++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->end = end;
    if (kind == EV_ERROR) {
        FUZZ_CHECK(p->error != HTTP_ERR_NONE);
        e->error = p->error;
        return;
    }
    if (kind == EV_EOF_MORE)
        return;
    /* A final response: 1xx interim ones are skipped, except 101. */
    FUZZ_CHECK(p->status >= 100 && p->status <= 999);
    FUZZ_CHECK(p->status >= 200 || p->status == 101);
    FUZZ_CHECK(p->error == HTTP_ERR_NONE);
    FUZZ_CHECK(http_started(p));
    e->status = p->status;
    e->keep_alive = p->keep_alive;
    e->head_len = p->head.len;
    e->head_hash = hash(&p->head);
    e->body_len = p->body.len;
    e->body_hash = hash(&p->body);
    if (p->want_head)
        check_head(p);
    else
        FUZZ_CHECK(p->head.len == 0);
    if (!p->want_body)
        FUZZ_CHECK(p->body.len == 0);
}

/* One piece, as conn.c's consume() feeds a read. Returns false once the
 * stream cannot go on (an error, or the event budget spent). */
static bool feed(struct trace *t, struct http_parser *p, const struct input *in, size_t a, size_t b,
                 size_t *responses)
{
    /* Each piece in its own exact-size allocation: a read past it is caught. */
    size_t n = b - a, off = 0;
    char *piece = malloc(n);
    FUZZ_CHECK(piece);
    memcpy(piece, in->stream + a, n);
    bool go_on = true;
    while (off < n) {
        size_t used = SIZE_MAX;
        enum http_result r = http_parse(p, piece + off, n - off, &used);
        FUZZ_CHECK(used <= n - off);
        if (r == HTTP_MORE) {
            FUZZ_CHECK(used == n - off);
            break;
        }
        off += used;
        /* Until the next http_begin(), the same answer and nothing used. */
        size_t again = SIZE_MAX;
        FUZZ_CHECK(http_parse(p, piece + off, n - off, &again) == r && again == 0);
        if (r == HTTP_ERROR) {
            record(t, EV_ERROR, p, 0);
            FUZZ_CHECK(http_eof(p) == HTTP_ERROR);
            go_on = false;
            break;
        }
        FUZZ_CHECK(used > 0);
        record(t, EV_DONE, p, a + off);
        if (t->n == MAX_EVENTS - 1) {
            go_on = false;
            break;
        }
        http_begin(p, is_head(in, ++*responses));
        FUZZ_CHECK(!http_started(p));
    }
    free(piece);
    return go_on;
}

/* next_cut(state, at) gives the end of the piece that starts at `at`. */
typedef size_t (*cutter)(uint32_t *state, size_t at, size_t len);

static size_t cut_whole(uint32_t *state, size_t at, size_t len)
{
    (void)state, (void)at;
    return len;
}

static size_t cut_bytes(uint32_t *state, size_t at, size_t len)
{
    (void)state, (void)len;
    return at + 1;
}

static size_t cut_random(uint32_t *state, size_t at, size_t len)
{
    *state = *state * 1103515245u + 12345u;
    /* Mostly short pieces, sometimes long ones. */
    uint32_t r = *state >> 16, size = r & 0x100 ? (r & 0x3ff) + 1 : (r & 0xf) + 1;
    return at + size < len ? at + size : len;
}

static void run(struct trace *t, const struct input *in, cutter next_cut)
{
    struct http_parser p;
    uint32_t state = in->seed;
    size_t responses = 0, at = 0;
    bool go_on = true;
    t->n = 0;
    http_parser_init(&p);
    p.want_head = in->want_head;
    p.want_body = in->want_body;
    http_begin(&p, is_head(in, 0));
    while (go_on && at < in->len) {
        size_t end = next_cut(&state, at, in->len);
        go_on = feed(t, &p, in, at, end, &responses);
        at = end;
    }
    if (go_on) {
        switch (http_eof(&p)) {
        case HTTP_DONE:
            record(t, EV_EOF_DONE, &p, in->len);
            break;
        case HTTP_MORE:
            record(t, EV_EOF_MORE, &p, in->len);
            break;
        case HTTP_ERROR:
            FUZZ_CHECK(p.error == HTTP_ERR_TRUNCATED);
            record(t, EV_ERROR, &p, 0);
            break;
        }
    }
    http_parser_free(&p);
}

static void same(const struct trace *a, const struct trace *b)
{
    FUZZ_CHECK(a->n == b->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct event *x = &a->ev[i], *y = &b->ev[i];
        FUZZ_CHECK(x->kind == y->kind);
        FUZZ_CHECK(x->status == y->status);
        FUZZ_CHECK(x->keep_alive == y->keep_alive);
        FUZZ_CHECK(x->error == y->error);
        FUZZ_CHECK(x->end == y->end);
        FUZZ_CHECK(x->head_len == y->head_len && x->head_hash == y->head_hash);
        FUZZ_CHECK(x->body_len == y->body_len && x->body_hash == y->body_hash);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct trace whole, random, bytes;
    if (size < 4)
        return 0;
    struct input in = {
        .stream = data + 4,
        .len = size - 4,
        .want_head = data[0] & 1,
        .want_body = data[0] & 2,
        .heads = data[1],
        .seed = (uint32_t)data[2] << 8 | data[3],
    };
    run(&whole, &in, cut_whole);
    run(&random, &in, cut_random);
    run(&bytes, &in, cut_bytes);
    same(&whole, &random);
    same(&whole, &bytes);
    /* Responses end in order, inside the stream. */
    for (size_t i = 1; i < whole.n; i++)
        if (whole.ev[i].kind == EV_DONE)
            FUZZ_CHECK(whole.ev[i].end > whole.ev[i - 1].end);
    return 0;
}
