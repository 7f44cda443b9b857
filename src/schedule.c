/* A binary min-heap of entries keyed on their intended time, with a
 * timerfd set to the root. Each entry remembers its slot (index + 1, 0 when
 * not queued) so that what it stands for (a connection that closes) can
 * leave the queue.
 * SPDX-License-Identifier: MIT */
#include "schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "xalloc.h"

static void place(struct schedule *s, size_t i, struct schedule_entry *e)
{
    s->heap[i] = e;
    e->slot = i + 1;
}

static void sift_up(struct schedule *s, size_t i)
{
    struct schedule_entry *e = s->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (s->heap[parent]->due <= e->due)
            break;
        place(s, i, s->heap[parent]);
        i = parent;
    }
    place(s, i, e);
}

static void sift_down(struct schedule *s, size_t i)
{
    struct schedule_entry *e = s->heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= s->n)
            break;
        if (child + 1 < s->n && s->heap[child + 1]->due < s->heap[child]->due)
            child++;
        if (e->due <= s->heap[child]->due)
            break;
        place(s, i, s->heap[child]);
        i = child;
    }
    place(s, i, e);
}

/* Point the timerfd at the earliest due time (absolute, so no drift). */
static void arm(struct schedule *s)
{
    uint64_t due = s->n ? s->heap[0]->due : 0;
    if (due == s->armed)
        return;
    struct itimerspec its = {0};
    if (due) {
        its.it_value.tv_sec = (time_t)(due / 1000000);
        its.it_value.tv_nsec = (long)(due % 1000000) * 1000;
    }
    timerfd_settime(s->fd, TFD_TIMER_ABSTIME, &its, NULL);
    s->armed = due;
}

static struct schedule_entry *pop(struct schedule *s)
{
    struct schedule_entry *top = s->heap[0];
    top->slot = 0;
    if (--s->n) {
        s->heap[0] = s->heap[s->n];
        sift_down(s, 0);
    }
    return top;
}

static void on_timer(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop, (void)revents;
    struct schedule *s = io->data;
    uint64_t expirations;
    if (read(s->fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        die("timerfd: %s", strerror(errno));
    s->armed = 0;
    uint64_t now = clock_us();
    while (s->n && s->heap[0]->due <= now)
        s->due(pop(s));
    arm(s);
}

void schedule_init(struct schedule *s, struct ev_loop *loop, size_t cap,
                   void (*due)(struct schedule_entry *e))
{
    memset(s, 0, sizeof *s);
    s->loop = loop;
    s->due = due;
    s->heap = xcalloc(cap ? cap : 1, sizeof *s->heap);
    s->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (s->fd < 0)
        die("timerfd: %s", strerror(errno));
    ev_io_init(&s->io, on_timer, s->fd, EV_READ);
    s->io.data = s;
    ev_io_start(loop, &s->io);
}

void schedule_free(struct schedule *s)
{
    if (!s->heap)
        return;
    ev_io_stop(s->loop, &s->io);
    close(s->fd);
    free(s->heap);
    memset(s, 0, sizeof *s);
}

void schedule_add(struct schedule *s, struct schedule_entry *e)
{
    s->heap[s->n++] = e;
    sift_up(s, s->n - 1);
    arm(s);
}

void schedule_remove(struct schedule *s, struct schedule_entry *e)
{
    if (!e->slot)
        return;
    size_t i = e->slot - 1;
    e->slot = 0;
    if (i != --s->n) {
        place(s, i, s->heap[s->n]);
        if (i > 0 && s->heap[(i - 1) / 2]->due > s->heap[i]->due)
            sift_up(s, i);
        else
            sift_down(s, i);
    }
    arm(s);
}
