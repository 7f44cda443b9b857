/* --remote-write: the run's metrics pushed to Prometheus (or Mimir, Thanos,
 * VictoriaMetrics...) as remote-write 1.0 requests: a protobuf WriteRequest,
 * snappy-compressed, POSTed over HTTP/1.1 from main's loop. Pushes queue up
 * (a bounded queue that drops its oldest) and go one at a time; a failed
 * one is tried again after a growing back-off. Nothing here ever waits.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_REMOTE_WRITE_H
#define VOLLEY_REMOTE_WRITE_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

/* Pushes queued at most: past it the oldest not on its way is dropped. */
#define REMOTE_WRITE_QUEUE 64
/* An attempt that has not been answered within this fails (seconds). */
#define REMOTE_WRITE_TIMEOUT 10.0
/* The pause after a failed attempt: doubling from the first to the last. */
#define REMOTE_WRITE_BACKOFF_MIN 0.1
#define REMOTE_WRITE_BACKOFF_MAX 10.0

struct remote_write_counts {
    uint64_t pushes;          /* queued */
    uint64_t delivered;       /* answered 2xx */
    uint64_t dropped;         /* given up: the queue was full, or the run over */
    uint64_t rejected;        /* answered 4xx (but 429): not tried again */
    uint64_t failed_attempts; /* attempts that failed and were tried again */
    const char *last_error;   /* NULL when none failed */
};

/* To url (http://HOST[:PORT]/PATH), its host resolved now: dies with one
 * line when it does not resolve, and with strict when nothing there takes
 * a connection. */
struct remote_write *remote_write_new(const char *url, bool strict);
void remote_write_start(struct remote_write *rw, struct ev_loop *loop);
void remote_write_free(struct remote_write *rw);

/* Adds a time series of one sample to the WriteRequest req: labels names[i]
 * = values[i] (any order; "__name__" among them), value at ts_ms (Unix time
 * in ms). */
void remote_write_series(struct buf *req, const char *const *names, const char *const *values,
                         size_t n, double value, int64_t ts_ms);
/* Queues the WriteRequest req to be pushed. final: the run's last, which
 * holds every total: pushes queued before it and not on their way are
 * dropped, so that it goes next. */
void remote_write_push(struct remote_write *rw, const struct buf *req, bool final);
/* Whether every push has been delivered, rejected or dropped. */
bool remote_write_idle(const struct remote_write *rw);
/* Gives up what is still queued (dropped) and closes the connection. */
void remote_write_stop(struct remote_write *rw);

void remote_write_counts(const struct remote_write *rw, struct remote_write_counts *c);
const char *remote_write_url(const struct remote_write *rw);

#endif
