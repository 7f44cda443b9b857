/* The io_uring engine's side of a connection: what the ring reports, as the
 * watchers in conn.c handle readiness: nothing once the worker is stopping,
 * and only in the state it answers.
 * SPDX-License-Identifier: MIT */
#include "conn_ring.h"

#include "conn.h"
#include "uring.h"

static void ring_connected(void *arg, int err)
{
    struct conn *c = arg;
    if (!c->live->stopping && c->state == CONN_CONNECTING)
        conn_connect_done(c, err);
}

static void ring_input(void *arg, const char *buf, size_t len, uint64_t now)
{
    struct conn *c = arg;
    if (!c->live->stopping && c->state == CONN_OPEN && conn_take(c, buf, len, now))
        conn_reply(c);
}

static void ring_eof(void *arg)
{
    struct conn *c = arg;
    if (!c->live->stopping && c->state == CONN_OPEN)
        conn_eof(c);
}

static void ring_read_failed(void *arg, int err)
{
    struct conn *c = arg;
    if (!c->live->stopping && c->state == CONN_OPEN)
        conn_read_failed(c, err);
}

static size_t ring_output(void *arg, const char **data)
{
    struct conn *c = arg;
    if (c->live->stopping || c->state != CONN_OPEN)
        return 0;
    return c->proto->output(c->session, data);
}

/* The rest, if the send was short; and the session may be free for the
 * next batch only now (a response that came before the last of its request
 * went out). */
static void ring_wrote(void *arg, size_t n)
{
    struct conn *c = arg;
    if (c->live->stopping || c->state != CONN_OPEN)
        return;
    conn_sent(c, n);
    conn_writable(c);
}

static void ring_write_failed(void *arg, int err)
{
    struct conn *c = arg;
    if (!c->live->stopping && c->state == CONN_OPEN)
        conn_write_failed(c, err);
}

static const struct uring_sink sink = {ring_connected,   ring_input,  ring_eof,
                                       ring_read_failed, ring_output, ring_wrote,
                                       ring_write_failed};

void conn_ring_init(struct conn *c, struct uring *ring, size_t index)
{
    uring_link_init(&c->link, ring, index, &sink, c);
}
