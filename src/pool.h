/* Memory one thread reuses: blocks of a few power-of-two sizes kept on free
 * lists instead of going back to malloc. An HTTP/2 session allocates and
 * frees the same few sizes for every stream (the stream, its frames, a
 * buffer per header field), and malloc's general bookkeeping costs more than
 * the work itself. One pool per connection slot, never shared between
 * threads.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_POOL_H
#define VOLLEY_POOL_H

#include <stddef.h>

/* Size classes: 32 bytes to 1 KiB, header included, where what a stream
 * needs falls; larger blocks (a session's buffers and tables) come from
 * malloc and go back to it, without rounding up. */
#define POOL_CLASSES 6

struct pool {
    void *free[POOL_CLASSES]; /* singly linked through the blocks */
    size_t held;              /* bytes on the free lists */
};

/* Like malloc, calloc, realloc and free; the memory is aligned as malloc's.
 * pool_alloc(p, 0) returns a block too. Out of memory ends volley (xmalloc). */
void *pool_alloc(struct pool *p, size_t size);
void *pool_calloc(struct pool *p, size_t n, size_t size);
void *pool_realloc(struct pool *p, void *ptr, size_t size);
void pool_put(struct pool *p, void *ptr);
/* Give every free block back to malloc. Blocks still in use stay valid and
 * may be put back later. */
void pool_clear(struct pool *p);

/* The same, shaped as the allocator callbacks of nghttp2, nghttp3 and
 * ngtcp2 (their *_mem structures), whose user data is the pool. */
void *pool_mem_malloc(size_t size, void *pool);
void pool_mem_free(void *ptr, void *pool);
void *pool_mem_calloc(size_t n, size_t size, void *pool);
void *pool_mem_realloc(void *ptr, size_t size, void *pool);

#endif
