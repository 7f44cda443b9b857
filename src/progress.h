/* The live progress line: elapsed and remaining time, requests (of -n),
 * the last interval's requests/sec and p99 latency, and errors, redrawn in place on stderr a few times a second
 * from main's loop, and erased before the report. Only on a terminal.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_PROGRESS_H
#define VOLLEY_PROGRESS_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct worker;
struct progress;
struct timeline;

/* Starts redrawing on loop, counting from start_us (clock_us). NULL, and
 * nothing is ever written, when --no-progress was given or stderr is not a
 * terminal. */
struct progress *progress_start(struct ev_loop *loop, const struct config *cfg,
                                struct worker **workers, size_t nworkers, uint64_t start_us,
                                const struct timeline *timeline);
/* Stops redrawing, erases the line and frees p (NULL is fine). */
void progress_end(struct progress *p);

/* --start-at: whether the wait has a countdown (a terminal, without
 * --no-progress); then "starting in 12s", left_us before the start, drawn
 * in place of the line, which left_us 0 erases. */
bool progress_countdown_wanted(const struct config *cfg);
void progress_countdown(uint64_t left_us);

#endif
