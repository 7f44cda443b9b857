/* Interval hand-off between the workers and main. Workers reach the same
 * boundary at about the same time, but one busy in a script hook can lag
 * behind by several intervals, so intervals not yet complete queue up in
 * order; their statistics are reused once main has written them.
 * SPDX-License-Identifier: MIT */
#include "interval.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

struct intervals {
    pthread_mutex_t lock;
    struct ev_loop *loop;
    ev_async *ready;
    size_t nworkers;
    uint64_t *next; /* per worker: the first interval it has not delivered */
    bool *ended;
    uint64_t first;         /* index of pending[0] */
    struct stats **pending; /* intervals first, first + 1, ... */
    size_t npending, cap;
    struct stats **spare; /* given back, to reuse */
    size_t nspare, spare_cap;
};

struct intervals *intervals_new(size_t nworkers, struct ev_loop *loop, ev_async *ready)
{
    struct intervals *iv = xcalloc(1, sizeof *iv);
    pthread_mutex_init(&iv->lock, NULL);
    iv->loop = loop;
    iv->ready = ready;
    iv->nworkers = nworkers;
    iv->next = xcalloc(nworkers, sizeof *iv->next);
    iv->ended = xcalloc(nworkers, sizeof *iv->ended);
    return iv;
}

static void stats_delete(struct stats *s)
{
    stats_free(s);
    free(s);
}

void intervals_free(struct intervals *iv)
{
    if (!iv)
        return;
    for (size_t i = 0; i < iv->npending; i++)
        stats_delete(iv->pending[i]);
    for (size_t i = 0; i < iv->nspare; i++)
        stats_delete(iv->spare[i]);
    free(iv->pending);
    free(iv->spare);
    free(iv->next);
    free(iv->ended);
    pthread_mutex_destroy(&iv->lock);
    free(iv);
}

/* The statistics of interval k (k >= first), queued up to it if need be. */
static struct stats *slot(struct intervals *iv, uint64_t k)
{
    while (iv->first + iv->npending <= k) {
        if (iv->npending == iv->cap) {
            iv->cap = iv->cap ? 2 * iv->cap : 4;
            iv->pending = xrealloc(iv->pending, iv->cap * sizeof *iv->pending);
        }
        struct stats *s;
        if (iv->nspare) {
            s = iv->spare[--iv->nspare];
        } else {
            s = xmalloc(sizeof *s);
            stats_init(s);
        }
        iv->pending[iv->npending++] = s;
    }
    return iv->pending[k - iv->first];
}

/* Whether interval first is complete: every worker is past it or ended. */
static bool complete(const struct intervals *iv)
{
    if (iv->npending == 0)
        return false;
    for (size_t w = 0; w < iv->nworkers; w++)
        if (iv->next[w] <= iv->first && !iv->ended[w])
            return false;
    return true;
}

void intervals_deliver(struct intervals *iv, size_t worker, const struct stats *s)
{
    pthread_mutex_lock(&iv->lock);
    stats_merge(slot(iv, iv->next[worker]++), s);
    bool ready = complete(iv);
    pthread_mutex_unlock(&iv->lock);
    if (ready)
        ev_async_send(iv->loop, iv->ready);
}

void intervals_end(struct intervals *iv, size_t worker)
{
    pthread_mutex_lock(&iv->lock);
    iv->ended[worker] = true;
    bool ready = complete(iv);
    pthread_mutex_unlock(&iv->lock);
    if (ready)
        ev_async_send(iv->loop, iv->ready);
}

struct stats *intervals_take(struct intervals *iv, uint64_t *index)
{
    struct stats *s = NULL;
    pthread_mutex_lock(&iv->lock);
    if (complete(iv)) {
        s = iv->pending[0];
        *index = iv->first++;
        memmove(iv->pending, iv->pending + 1, --iv->npending * sizeof *iv->pending);
    }
    pthread_mutex_unlock(&iv->lock);
    return s;
}

void intervals_give_back(struct intervals *iv, struct stats *s)
{
    stats_reset(s);
    pthread_mutex_lock(&iv->lock);
    /* More may come back than pending ever held at once: main holds one
     * taken while the workers fill pending up to its capacity again. */
    if (iv->nspare == iv->spare_cap) {
        iv->spare_cap = iv->spare_cap ? 2 * iv->spare_cap : 4;
        iv->spare = xrealloc(iv->spare, iv->spare_cap * sizeof *iv->spare);
    }
    iv->spare[iv->nspare++] = s;
    pthread_mutex_unlock(&iv->lock);
}
