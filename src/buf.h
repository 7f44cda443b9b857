/* A growable byte buffer: what an incomplete response head, a captured body
 * or a formatted request is kept in. Grows, is reused, never shrinks.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_BUF_H
#define VOLLEY_BUF_H

#include <stddef.h>

struct buf {
    char *data;
    size_t len, cap;
};

/* Make room for n more bytes. */
void buf_reserve(struct buf *b, size_t n);
void buf_append(struct buf *b, const void *data, size_t n);
/* n bytes in base64 (RFC 4648 §4, padded), NUL-terminated (the NUL is
 * not counted in len). */
void buf_append_base64(struct buf *b, const void *data, size_t n);
static inline void buf_clear(struct buf *b) { b->len = 0; }
/* Empty it for reuse, giving the memory back if it grew past keep bytes:
 * thousands of connections must not each hold their largest response ever. */
void buf_reset(struct buf *b, size_t keep);
void buf_free(struct buf *b);

#endif
