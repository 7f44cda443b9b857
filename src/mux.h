/* The requests a multiplexed session (HTTP/2, HTTP/3) has in flight: a
 * record for each (when it was submitted, sent and first answered, its
 * status, its response's fields and body for the response() hook), kept in
 * submission order, the oldest first, which gives the response timeout; the
 * copies of the batches request() returned, kept while a stream may read
 * their bytes; and how each request ends, through the session's sink.
 * A session's record begins with struct mux_req and its batch with struct
 * mux_batch, followed by what only its protocol keeps: records are made at
 * the sizes the session gives, and reused across streams and reconnects.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_MUX_H
#define VOLLEY_MUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "h2req.h"
#include "proto.h"

struct mux_batch {
    struct mux_batch *next_free;
    struct h2req_batch copy;
    size_t open; /* its requests whose stream may still read its bytes */
};

struct mux_req {
    struct mux_req *prev, *next; /* in flight, oldest first; next: the free list */
    struct mux_batch *batch;     /* NULL for the static request */
    const struct h2req_msg *msg;
    uint64_t queued_at; /* submitted: --timeout counts from here */
    uint64_t start_at;  /* where latency counts from under -R, else 0 */
    uint64_t sent_at;   /* its stream went out, 0 until then */
    uint64_t first_at;  /* its response's first head began, 0 until then */
    int status;
    bool final;              /* its final (non-1xx) response head has come */
    bool ended;              /* answered, failed or handed back */
    bool reset;              /* the server reset it */
    bool used;               /* not on the free list */
    struct buf fields, body; /* for the response() hook */
};

struct mux {
    const struct proto_sink *sink; /* where the requests end, with arg */
    void *arg;
    size_t req_size, batch_size;
    struct mux_req *head, *tail; /* in flight */
    size_t inflight;
    bool stopped; /* a response() hook ended the run: count nothing more */
    /* Every record ever made, and those free to reuse. */
    struct mux_req **reqs, *free_reqs;
    size_t nreqs;
    struct mux_batch **batches, *free_batches;
    size_t nbatches;
};

/* Records of req_size and batches of batch_size bytes, ending their
 * requests in sink with arg. */
void mux_init(struct mux *m, const struct proto_sink *sink, void *arg, size_t req_size,
              size_t batch_size);
/* Frees every record and batch; done(b), unless NULL, frees what the
 * session's part of each batch holds. */
void mux_free(struct mux *m, void (*done)(struct mux_batch *b));

/* A batch record for what request() returned, not in use. */
struct mux_batch *mux_batch(struct mux *m);
/* A record for request msg (of batch b, or of the static request when b is
 * NULL), submitted at now with latency counted from start_at (0: from when
 * it goes out), added last to those in flight. What follows struct mux_req
 * is the session's to set. */
struct mux_req *mux_add(struct mux *m, struct mux_batch *b, const struct h2req_msg *msg,
                        uint64_t now, uint64_t start_at);
/* The stream is done with r: its record, and its batch once no stream reads
 * it, may be reused. */
void mux_put(struct mux *m, struct mux_req *r);

/* How a request in flight ends: out of those in flight, and to the sink. */
/* Answered at now by its final response: after it, m->stopped says whether
 * the hook ended the run. */
void mux_answered(struct mux *m, struct mux_req *r, uint64_t now);
/* Failed on its own: a read error under cause. */
void mux_failed(struct mux *m, struct mux_req *r, enum cause cause);
/* Not sent: a write error under cause. */
void mux_unsent(struct mux *m, struct mux_req *r, enum cause cause);
/* Refused unprocessed by the server: sent again, as the sink decides. */
void mux_refused(struct mux *m, struct mux_req *r);
/* Not answered on this connection, with nobody at fault: -n sends it again. */
void mux_returned(struct mux *m, struct mux_req *r);
/* Just out of those in flight, for an end the session has counted. */
void mux_end(struct mux *m, struct mux_req *r);

/* Whether a batch of depth more requests fits under limit streams (a first
 * one always does). */
static inline bool mux_room(const struct mux *m, size_t depth, size_t limit)
{
    return m->inflight == 0 || m->inflight + depth <= limit;
}

/* The connection is going: every record and batch goes back, whatever its
 * state, with no call to the sink. */
void mux_abort(struct mux *m);

#endif
