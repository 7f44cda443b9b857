/* The requests in flight of a multiplexed session (HTTP/2, HTTP/3): their
 * records and batches, made once and reused, and their ends through the
 * session's sink.
 * SPDX-License-Identifier: MIT */
#include "mux.h"

#include <stdlib.h>

#include "xalloc.h"

/* What a record's response buffers may keep once it is done. */
#define MUX_KEEP (16 * 1024)

void mux_init(struct mux *m, const struct proto_sink *sink, void *arg, size_t req_size,
              size_t batch_size)
{
    *m = (struct mux){.sink = sink, .arg = arg, .req_size = req_size, .batch_size = batch_size};
}

void mux_free(struct mux *m, void (*done)(struct mux_batch *b))
{
    for (size_t i = 0; i < m->nreqs; i++) {
        buf_free(&m->reqs[i]->fields);
        buf_free(&m->reqs[i]->body);
        free(m->reqs[i]);
    }
    for (size_t i = 0; i < m->nbatches; i++) {
        h2req_batch_free(&m->batches[i]->copy);
        if (done)
            done(m->batches[i]);
        free(m->batches[i]);
    }
    free(m->reqs);
    free(m->batches);
}

struct mux_batch *mux_batch(struct mux *m)
{
    struct mux_batch *b = m->free_batches;
    if (b) {
        m->free_batches = b->next_free;
    } else {
        b = xcalloc(1, m->batch_size);
        m->batches = xrealloc(m->batches, (m->nbatches + 1) * sizeof *m->batches);
        m->batches[m->nbatches++] = b;
    }
    b->open = 0;
    return b;
}

static void batch_put(struct mux *m, struct mux_batch *b)
{
    b->next_free = m->free_batches;
    m->free_batches = b;
}

struct mux_req *mux_add(struct mux *m, struct mux_batch *b, const struct h2req_msg *msg,
                        uint64_t now, uint64_t start_at)
{
    struct mux_req *r = m->free_reqs;
    if (r) {
        m->free_reqs = r->next;
    } else {
        r = xcalloc(1, m->req_size);
        m->reqs = xrealloc(m->reqs, (m->nreqs + 1) * sizeof *m->reqs);
        m->reqs[m->nreqs++] = r;
    }
    r->used = true;
    r->batch = b;
    if (b)
        b->open++;
    r->msg = msg;
    r->queued_at = now;
    r->start_at = start_at;
    r->sent_at = r->first_at = 0;
    r->status = 0;
    r->final = r->ended = r->reset = false;
    r->prev = m->tail;
    r->next = NULL;
    if (m->tail)
        m->tail->next = r;
    else
        m->head = r;
    m->tail = r;
    m->inflight++;
    return r;
}

void mux_put(struct mux *m, struct mux_req *r)
{
    if (r->batch && --r->batch->open == 0)
        batch_put(m, r->batch);
    r->batch = NULL;
    buf_reset(&r->fields, MUX_KEEP);
    buf_reset(&r->body, MUX_KEEP);
    r->used = false;
    r->next = m->free_reqs;
    m->free_reqs = r;
}

void mux_end(struct mux *m, struct mux_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        m->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        m->tail = r->prev;
    r->prev = r->next = NULL;
    r->ended = true;
    m->inflight--;
}

void mux_answered(struct mux *m, struct mux_req *r, uint64_t now)
{
    uint64_t sent = r->sent_at ? r->sent_at : r->queued_at;
    struct proto_response resp = {
        .status = r->status,
        .lower_case = true,
        .fields = r->fields.data,
        .fields_len = r->fields.len,
        .body = r->body.data,
        .body_len = r->body.len,
        .start_at = r->start_at ? r->start_at : sent,
        .sent_at = sent,
        .first_at = r->first_at ? r->first_at : now,
        .done_at = now,
    };
    mux_end(m, r);
    if (!m->sink->response(m->arg, &resp))
        m->stopped = true;
}

void mux_failed(struct mux *m, struct mux_req *r, enum cause cause)
{
    mux_end(m, r);
    m->sink->failed(m->arg, cause);
}

void mux_unsent(struct mux *m, struct mux_req *r, enum cause cause)
{
    mux_end(m, r);
    m->sink->unsent(m->arg, cause);
}

void mux_refused(struct mux *m, struct mux_req *r)
{
    mux_end(m, r);
    m->sink->refused(m->arg);
}

void mux_returned(struct mux *m, struct mux_req *r)
{
    mux_end(m, r);
    m->sink->returned(m->arg, 1);
}

void mux_abort(struct mux *m)
{
    m->head = m->tail = NULL;
    m->inflight = 0;
    m->free_reqs = NULL;
    for (size_t i = 0; i < m->nreqs; i++) {
        struct mux_req *r = m->reqs[i];
        if (r->used) {
            r->batch = NULL;
            mux_put(m, r);
        } else {
            r->next = m->free_reqs;
            m->free_reqs = r;
        }
    }
    m->free_batches = NULL;
    for (size_t i = 0; i < m->nbatches; i++)
        batch_put(m, m->batches[i]);
}
