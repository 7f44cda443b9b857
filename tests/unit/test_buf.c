/* Unit tests for src/buf.c: doubling while small, then growth by what is
 * needed plus a bounded margin, so that a huge buffer is not twice its size.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include <string.h>

#include "buf.h"

TEST(small_buffers_double)
{
    struct buf b = {0};
    buf_append(&b, "abc", 3);
    CHECK_U64(b.cap, 256);
    char block[300];
    memset(block, 'x', sizeof block);
    buf_append(&b, block, sizeof block);
    CHECK_U64(b.cap, 512);
    CHECK_U64(b.len, 303);
    CHECK(memcmp(b.data, "abcxxx", 6) == 0);
    buf_free(&b);
}

TEST(large_buffers_grow_by_a_bounded_margin)
{
    enum { PIECE = 64 * 1024, MIB = 1024 * 1024 };
    static char piece[PIECE];
    struct buf b = {0};
    memset(piece, 'y', sizeof piece);
    for (size_t i = 0; i < 48 * MIB / PIECE; i++) {
        buf_append(&b, piece, sizeof piece);
        CHECK(b.cap >= b.len);
        CHECK(b.cap <= 2 * MIB || b.cap - b.len <= MIB);
    }
    CHECK_U64(b.len, 48 * MIB);
    CHECK(b.data[b.len - 1] == 'y');
    buf_reset(&b, 64 * 1024);
    CHECK(b.data == NULL && b.cap == 0);
}
