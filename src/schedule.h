/* The constant-rate schedule of one worker (-R): the connections waiting for
 * their next intended send time, earliest first, and one timerfd armed for
 * the earliest. libev's epoll backend rounds its own timers to milliseconds;
 * a timerfd wakes the loop to the microsecond.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SCHEDULE_H
#define VOLLEY_SCHEDULE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

struct conn;

struct schedule {
    struct ev_loop *loop;
    int fd; /* timerfd, CLOCK_MONOTONIC like clock_us() */
    ev_io io;
    struct conn **heap; /* min-heap on conn->due */
    size_t n;
    uint64_t armed;              /* the due time the timerfd is set for, 0 if none */
    void (*due)(struct conn *c); /* called for each connection whose time came */
};

/* Room for cap connections. Dies if the timerfd cannot be made. */
void schedule_init(struct schedule *s, struct ev_loop *loop, size_t cap,
                   void (*due)(struct conn *c));
void schedule_free(struct schedule *s);
/* Queue c until c->due (in us, clock_us's clock). */
void schedule_add(struct schedule *s, struct conn *c);
/* Take c out of the queue if it is in it. */
void schedule_remove(struct schedule *s, struct conn *c);

#endif
