/* The hand-off of interval statistics from the workers to main. At each
 * interval boundary a worker adds what it recorded since the last one into
 * the shared total for that interval; when every worker has delivered an
 * interval (or ended), main takes it, oldest first. A mutex guards the
 * hand-off: it is taken once per worker per interval, never per response.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_INTERVAL_H
#define VOLLEY_INTERVAL_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"

struct intervals;

/* For nworkers workers; main's loop is woken through ready (an ev_async
 * started on loop) whenever an interval becomes complete. */
struct intervals *intervals_new(size_t nworkers, struct ev_loop *loop, ev_async *ready);
void intervals_free(struct intervals *iv);

/* Worker thread: s holds what worker recorded in its next interval. */
void intervals_deliver(struct intervals *iv, size_t worker, const struct stats *s);
/* Worker thread: the worker delivers nothing more (its run is over). */
void intervals_end(struct intervals *iv, size_t worker);

/* Main: the oldest interval every worker has delivered or ended before, and
 * its index (from 0), or NULL. Give it back once written. */
struct stats *intervals_take(struct intervals *iv, uint64_t *index);
void intervals_give_back(struct intervals *iv, struct stats *s);

#endif
