/* The /metrics endpoint: a small HTTP/1.1 server on main's loop that
 * answers GET /metrics with the text it was last given, and anything else
 * with 404 or 405. Bounded against clients that misbehave: a few
 * connections at once (a new one pushes out the one that has waited
 * longest for its request), a request head of a few KiB, and a deadline
 * for every request and every answer.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SCRAPE_H
#define VOLLEY_SCRAPE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

/* Connections served at once. */
#define SCRAPE_CONNS 16
/* The largest request head read; a larger one gets 431. */
#define SCRAPE_HEAD_MAX 4096
/* A request must arrive within this of the connection's opening (or of the
 * last answer), and its answer be taken within it too (seconds). */
#define SCRAPE_DEADLINE 10.0

struct scrape;

/* Serves on fd, a listening socket (non-blocking); takes it. */
struct scrape *scrape_new(int fd);
void scrape_start(struct scrape *s, struct ev_loop *loop);
/* What GET /metrics answers from now on (copied; an answer under way keeps
 * the text it started with). */
void scrape_set_body(struct scrape *s, const char *data, size_t len);
/* Answers of 200 so far. */
uint64_t scrape_count(const struct scrape *s);
/* Closes every connection and the socket. */
void scrape_free(struct scrape *s);

#endif
