/* The constant-rate schedule of one worker (-R): what waits for its next
 * intended time (the connections, each an entry), earliest first, and one
 * timerfd armed for the earliest. libev's epoll backend rounds its own timers to milliseconds;
 * a timerfd wakes the loop to the microsecond.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SCHEDULE_H
#define VOLLEY_SCHEDULE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

/* What waits, embedded in what it stands for (a connection). */
struct schedule_entry {
    uint64_t due; /* its intended time, clock_us's clock */
    size_t slot;  /* its place in the heap + 1, 0 when not queued */
};

struct schedule {
    struct ev_loop *loop;
    int fd; /* timerfd, CLOCK_MONOTONIC like clock_us() */
    ev_io io;
    struct schedule_entry **heap; /* min-heap on due */
    size_t n;
    uint64_t armed;                        /* the due time the timerfd is set for, 0 if none */
    void (*due)(struct schedule_entry *e); /* called for each entry whose time came */
};

/* Room for cap connections. Dies if the timerfd cannot be made. */
void schedule_init(struct schedule *s, struct ev_loop *loop, size_t cap,
                   void (*due)(struct schedule_entry *e));
void schedule_free(struct schedule *s);
/* Queue e until e->due. */
void schedule_add(struct schedule *s, struct schedule_entry *e);
/* Take e out of the queue if it is in it. */
void schedule_remove(struct schedule *s, struct schedule_entry *e);

#endif
