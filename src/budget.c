/* The -n budget: lock-free counters shared by the workers.
 * SPDX-License-Identifier: MIT */
#include "budget.h"

void budget_init(struct budget *b, uint64_t n, void (*spent)(void *arg), void *arg)
{
    atomic_init(&b->unsent, n);
    atomic_init(&b->unresolved, n);
    b->spent = spent;
    b->arg = arg;
}

bool budget_done(struct budget *b)
{
    return b->spent && atomic_load_explicit(&b->unresolved, memory_order_acquire) == 0;
}

size_t budget_claim(struct budget *b, size_t want)
{
    uint64_t left = atomic_load_explicit(&b->unsent, memory_order_relaxed), take;
    do {
        take = left < want ? left : want;
        if (take == 0)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&b->unsent, &left, left - take,
                                                    memory_order_relaxed, memory_order_relaxed));
    return (size_t)take;
}

bool budget_left(struct budget *b)
{
    return atomic_load_explicit(&b->unsent, memory_order_relaxed) > 0;
}

void budget_return(struct budget *b, size_t n)
{
    atomic_fetch_add_explicit(&b->unsent, n, memory_order_relaxed);
}

void budget_resolve(struct budget *b, size_t n)
{
    if (n && atomic_fetch_sub_explicit(&b->unresolved, n, memory_order_acq_rel) == n)
        b->spent(b->arg);
}
