/* Growable byte buffers.
 * SPDX-License-Identifier: MIT */
#include "buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* Past this, a buffer grows by what it needs plus this much, not twice its
 * size (as Redis' sds): a 600 MB body must not cost 1 GiB. */
#define BUF_MAX_PREALLOC (1024 * 1024)

static void grow(struct buf *b, size_t n) __attribute__((noinline));
static void grow(struct buf *b, size_t n)
{
    if (n > SIZE_MAX - BUF_MAX_PREALLOC - b->len)
        die("out of memory (%zu more bytes for a buffer of %zu)", n, b->len);
    size_t need = b->len + n, cap = b->cap ? b->cap : 256;
    while (cap < need && cap < BUF_MAX_PREALLOC)
        cap *= 2;
    if (cap < need)
        cap = need + BUF_MAX_PREALLOC;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void buf_reserve(struct buf *b, size_t n)
{
    if (b->cap - b->len < n)
        grow(b, n);
}

void buf_append(struct buf *b, const void *data, size_t n)
{
    if (n == 0)
        return;
    buf_reserve(b, n);
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

void buf_append_base64(struct buf *b, const void *data, size_t n)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *in = data;
    buf_reserve(b, (n + 2) / 3 * 4 + 1);
    char *p = b->data + b->len;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            w |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            w |= in[i + 2];
        *p++ = digits[w >> 18];
        *p++ = digits[(w >> 12) & 63];
        *p++ = i + 1 < n ? digits[(w >> 6) & 63] : '=';
        *p++ = i + 2 < n ? digits[w & 63] : '=';
    }
    *p = '\0';
    b->len = (size_t)(p - b->data);
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
