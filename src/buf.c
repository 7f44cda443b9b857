/* Growable byte buffers.
 * SPDX-License-Identifier: MIT */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void buf_reserve(struct buf *b, size_t n)
{
    if (b->cap - b->len >= n)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void buf_append(struct buf *b, const void *data, size_t n)
{
    if (n == 0)
        return;
    buf_reserve(b, n);
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

void buf_reset(struct buf *b, size_t keep)
{
    if (b->cap > keep)
        buf_free(b);
    b->len = 0;
}

void buf_free(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
