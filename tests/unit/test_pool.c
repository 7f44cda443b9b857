/* The memory pool HTTP/2 sessions allocate from (src/pool.c): blocks are
 * reused by size class, keep their contents through realloc, are aligned
 * like malloc's, and what is held is bounded.
 * SPDX-License-Identifier: MIT */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "unit.h"

TEST(a_block_put_back_is_reused_for_the_same_class)
{
    struct pool p = {0};
    void *a = pool_alloc(&p, 100);
    pool_put(&p, a);
    CHECK(p.held > 0);
    /* 100 and 90 bytes share a class; 1000 does not. */
    CHECK(pool_alloc(&p, 90) == a);
    CHECK_U64(p.held, 0);
    void *b = pool_alloc(&p, 1000);
    CHECK(b != a);
    pool_put(&p, a);
    pool_put(&p, b);
    pool_clear(&p);
    CHECK_U64(p.held, 0);
}

TEST(blocks_are_aligned_and_hold_what_was_asked)
{
    struct pool p = {0};
    void *blocks[64];
    for (size_t i = 0; i < 64; i++) {
        size_t size = i * 517;
        blocks[i] = pool_alloc(&p, size);
        CHECK((uintptr_t)blocks[i] % alignof(max_align_t) == 0);
        memset(blocks[i], (int)i, size);
    }
    for (size_t i = 0; i < 64; i++) {
        const unsigned char *b = blocks[i];
        for (size_t k = 0; k < i * 517; k++)
            if (b[k] != (unsigned char)i) {
                UNIT_FAIL("block %zu byte %zu changed", i, k);
                break;
            }
        pool_put(&p, blocks[i]);
    }
    pool_clear(&p);
}

TEST(realloc_keeps_the_contents_and_grows_in_place_within_a_class)
{
    struct pool p = {0};
    char *a = pool_realloc(&p, NULL, 10);
    memcpy(a, "0123456789", 10);
    CHECK(pool_realloc(&p, a, 12) == a); /* still room in its block */
    char *b = pool_realloc(&p, a, 500);
    CHECK(memcmp(b, "0123456789", 10) == 0);
    char *c = pool_realloc(&p, b, 100000); /* past the largest class */
    CHECK(memcmp(c, "0123456789", 10) == 0);
    char *d = pool_realloc(&p, c, 50);
    CHECK(d == c); /* shrinking keeps the block */
    pool_put(&p, d);
    pool_clear(&p);
}

TEST(calloc_zeroes_a_reused_block)
{
    struct pool p = {0};
    unsigned char *a = pool_alloc(&p, 64);
    memset(a, 0xff, 64);
    pool_put(&p, a);
    unsigned char *b = pool_calloc(&p, 8, 8);
    CHECK(b == a);
    for (int i = 0; i < 64; i++)
        CHECK(b[i] == 0);
    pool_put(&p, b);
    pool_clear(&p);
}

TEST(what_it_holds_is_bounded)
{
    struct pool p = {0};
    void *blocks[400];
    for (int i = 0; i < 400; i++)
        blocks[i] = pool_alloc(&p, 1000);
    for (int i = 0; i < 400; i++)
        pool_put(&p, blocks[i]);
    /* 400 blocks of 1 KiB: the rest past 256 KiB went back to malloc. */
    CHECK(p.held <= 256 * 1024);
    CHECK(p.held >= 256 * 1024 - 1024);
    /* Blocks past the largest class are never held. */
    pool_put(&p, pool_alloc(&p, 1 << 20));
    CHECK(p.held <= 256 * 1024);
    pool_clear(&p);
    CHECK_U64(p.held, 0);
}
