/* Unit tests for src/interval.c: an interval is taken only once every worker
 * has delivered it or ended, oldest first, with every worker's part in it.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include <ev.h>

#include "hist.h"
#include "interval.h"
#include "stats.h"

struct fixture {
    struct ev_loop *loop;
    ev_async ready;
    struct intervals *iv;
    struct stats s;
};

static void on_ready(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)loop, (void)a, (void)revents;
}

static void setup(struct fixture *f, size_t workers)
{
    f->loop = ev_loop_new(EVFLAG_AUTO);
    ev_async_init(&f->ready, on_ready);
    ev_async_start(f->loop, &f->ready);
    f->iv = intervals_new(workers, f->loop, &f->ready);
    stats_init(&f->s);
}

static void teardown(struct fixture *f)
{
    intervals_free(f->iv);
    stats_free(&f->s);
    ev_async_stop(f->loop, &f->ready);
    ev_loop_destroy(f->loop);
}

/* Worker w delivers an interval of n requests of latency v. */
static void deliver(struct fixture *f, size_t w, uint64_t n, uint64_t v)
{
    stats_reset(&f->s);
    f->s.requests = n;
    hist_record_n(f->s.latency, v, n);
    intervals_deliver(f->iv, w, &f->s);
}

TEST(taken_in_order_once_every_worker_delivered)
{
    struct fixture f;
    uint64_t k;
    setup(&f, 2);
    deliver(&f, 0, 1, 10);
    deliver(&f, 0, 2, 20); /* worker 0 is ahead */
    CHECK(intervals_take(f.iv, &k) == NULL);
    deliver(&f, 1, 10, 100);
    struct stats *s = intervals_take(f.iv, &k);
    CHECK(s != NULL);
    CHECK_U64(k, 0);
    CHECK_U64(s->requests, 11);
    CHECK_U64(hist_count(s->latency), 11);
    CHECK_U64(hist_max(s->latency), 100);
    intervals_give_back(f.iv, s);
    CHECK(intervals_take(f.iv, &k) == NULL); /* interval 1 waits for worker 1 */
    deliver(&f, 1, 20, 200);
    s = intervals_take(f.iv, &k);
    CHECK(s != NULL);
    CHECK_U64(k, 1);
    CHECK_U64(s->requests, 22);
    intervals_give_back(f.iv, s);
    CHECK(intervals_take(f.iv, &k) == NULL);
    /* Interval 2 reuses what was given back: only its own samples are in it. */
    deliver(&f, 0, 3, 5);
    deliver(&f, 1, 4, 7);
    s = intervals_take(f.iv, &k);
    CHECK(s != NULL);
    CHECK_U64(k, 2);
    CHECK_U64(s->requests, 7);
    CHECK_U64(hist_count(s->latency), 7);
    CHECK_U64(hist_min(s->latency), 5);
    CHECK_U64(hist_max(s->latency), 7);
    intervals_give_back(f.iv, s);
    teardown(&f);
}

TEST(an_ended_worker_holds_nothing_up)
{
    struct fixture f;
    uint64_t k;
    setup(&f, 3);
    for (int i = 0; i < 5; i++)
        deliver(&f, 0, 1, 1);
    deliver(&f, 1, 7, 1);
    intervals_end(f.iv, 1);
    deliver(&f, 2, 1, 1);
    deliver(&f, 2, 1, 1);
    uint64_t requests[5] = {0};
    struct stats *s;
    while ((s = intervals_take(f.iv, &k))) {
        CHECK(k < 2);
        requests[k] = s->requests;
        intervals_give_back(f.iv, s);
    }
    CHECK_U64(requests[0], 9);
    CHECK_U64(requests[1], 2);
    intervals_end(f.iv, 2);
    for (uint64_t want = 2; want < 5; want++) {
        s = intervals_take(f.iv, &k);
        CHECK(s != NULL && k == want && s->requests == 1);
        if (s)
            intervals_give_back(f.iv, s);
    }
    CHECK(intervals_take(f.iv, &k) == NULL);
    teardown(&f);
}

TEST(more_given_back_than_were_ever_pending_at_once)
{
    /* Main holds one interval while the worker fills pending up to its
     * capacity (4) again: five come back, one more than pending held. */
    struct fixture f;
    uint64_t k;
    setup(&f, 1);
    for (int i = 0; i < 4; i++)
        deliver(&f, 0, 1, 1);
    struct stats *held = intervals_take(f.iv, &k);
    CHECK(held != NULL && k == 0);
    deliver(&f, 0, 1, 1);
    intervals_give_back(f.iv, held);
    struct stats *s;
    while ((s = intervals_take(f.iv, &k)))
        intervals_give_back(f.iv, s);
    CHECK(k == 4);
    /* The spares are reused, each reset. */
    for (int i = 0; i < 6; i++)
        deliver(&f, 0, 2, 1);
    for (uint64_t want = 5; want < 11; want++) {
        s = intervals_take(f.iv, &k);
        CHECK(s != NULL && k == want && s->requests == 2);
        if (s)
            intervals_give_back(f.iv, s);
    }
    teardown(&f);
}
