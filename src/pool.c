/* Size-class free lists over malloc. Each block starts with a header that
 * says its class (or, past the largest, its size), so that put and realloc
 * need no size from the caller, as free and realloc do not.
 * SPDX-License-Identifier: MIT */
#include "pool.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#define POOL_MIN 32 /* 1 << 5 */
#define POOL_MAX (POOL_MIN << (POOL_CLASSES - 1))
/* Free blocks kept past this go back to malloc: a connection that once
 * needed much does not hold it for the rest of the run. */
#define POOL_HOLD_MAX (256 * 1024)

/* The header keeps what follows it aligned as malloc's memory is. */
union header {
    size_t size; /* of the whole block: a class size, or more than POOL_MAX */
    alignas(max_align_t) char align[alignof(max_align_t)];
};

#define HEADER sizeof(union header)

static union header *header_of(void *ptr) { return (union header *)ptr - 1; }

/* The class whose blocks hold total bytes, or POOL_CLASSES past the largest. */
static unsigned class_of(size_t total)
{
    if (total <= POOL_MIN)
        return 0;
    if (total > POOL_MAX)
        return POOL_CLASSES;
    /* ceil(log2(total)) - log2(POOL_MIN) */
    return (unsigned)(sizeof(unsigned long long) * 8 - (size_t)__builtin_clzll(total - 1)) - 5;
}

void *pool_alloc(struct pool *p, size_t size)
{
    if (size > (size_t)-1 - HEADER)
        die("out of memory");
    size_t total = size + HEADER;
    unsigned c = class_of(total);
    union header *h;
    if (c == POOL_CLASSES) {
        h = xmalloc(total);
        h->size = total;
    } else if (p->free[c]) {
        h = header_of(p->free[c]);
        p->free[c] = *(void **)p->free[c];
        p->held -= h->size;
    } else {
        h = xmalloc((size_t)POOL_MIN << c);
        h->size = (size_t)POOL_MIN << c;
    }
    return h + 1;
}

void *pool_calloc(struct pool *p, size_t n, size_t size)
{
    if (size && n > (size_t)-1 / size)
        die("out of memory");
    void *ptr = pool_alloc(p, n * size);
    memset(ptr, 0, n * size);
    return ptr;
}

void pool_put(struct pool *p, void *ptr)
{
    if (!ptr)
        return;
    union header *h = header_of(ptr);
    if (h->size > POOL_MAX || p->held + h->size > POOL_HOLD_MAX) {
        free(h);
        return;
    }
    unsigned c = class_of(h->size);
    *(void **)ptr = p->free[c];
    p->free[c] = ptr;
    p->held += h->size;
}

void *pool_realloc(struct pool *p, void *ptr, size_t size)
{
    if (!ptr)
        return pool_alloc(p, size);
    size_t room = header_of(ptr)->size - HEADER;
    if (size <= room)
        return ptr;
    void *bigger = pool_alloc(p, size);
    memcpy(bigger, ptr, room); /* all of it: the new block is bigger */
    pool_put(p, ptr);
    return bigger;
}

void pool_clear(struct pool *p)
{
    for (unsigned c = 0; c < POOL_CLASSES; c++) {
        while (p->free[c]) {
            void *next = *(void **)p->free[c];
            free(header_of(p->free[c]));
            p->free[c] = next;
        }
    }
    p->held = 0;
}

void *pool_mem_malloc(size_t size, void *pool) { return pool_alloc(pool, size); }
void pool_mem_free(void *ptr, void *pool) { pool_put(pool, ptr); }
void *pool_mem_calloc(size_t n, size_t size, void *pool) { return pool_calloc(pool, n, size); }
void *pool_mem_realloc(void *ptr, size_t size, void *pool) { return pool_realloc(pool, ptr, size); }
