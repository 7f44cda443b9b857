/* Unit tests for src/profile.c: a constant rate gives wrk2's even pace, a
 * ramp's requests add up to the area under it and are due ever closer
 * together, a stage at rate 0 sends nothing, and the due time of request n
 * is the inverse of the count due by then.
 * SPDX-License-Identifier: MIT */
#include "unit.h"

#include <math.h>

#include "profile.h"

TEST(a_constant_rate_is_an_even_pace)
{
    struct profile p;
    profile_init(&p, 1000);
    profile_add(&p, INFINITY, 1000);
    CHECK_DBL(profile_due_us(&p, 0), 0, 0);
    CHECK_DBL(profile_due_us(&p, 1), 1000, 1e-9);
    CHECK_DBL(profile_due_us(&p, 2500), 2.5e6, 1e-6);
    CHECK_DBL(profile_requests(&p, 3e6), 3000, 1e-9);
    profile_free(&p);
}

TEST(a_ramp_from_zero_adds_up_to_its_area)
{
    struct profile p;
    profile_init(&p, 0);
    profile_add(&p, 2e6, 2000); /* --stages 2s:2000 */
    CHECK_DBL(profile_requests(&p, 2e6), 2000, 1e-9);
    CHECK_DBL(profile_requests(&p, 1e6), 500, 1e-9);
    CHECK_DBL(profile_due_us(&p, 0), 0, 0);
    CHECK_DBL(profile_due_us(&p, 500), 1e6, 1e-6);
    CHECK_DBL(profile_due_us(&p, 1999.999), 2e6, 2);
    CHECK(isinf(profile_due_us(&p, 2000))); /* the profile is over */
    /* ever closer together: the gaps shrink as the rate rises */
    double last_gap = INFINITY;
    for (double n = 1; n < 2000; n += 100) {
        double gap = profile_due_us(&p, n + 1) - profile_due_us(&p, n);
        CHECK(gap > 0 && gap < last_gap);
        last_gap = gap;
    }
    profile_free(&p);
}

TEST(stages_start_from_the_rate_before_them)
{
    struct profile p;
    profile_init(&p, 0);
    profile_add(&p, 1e6, 1000); /* --stages 1s:1000,2s:1000 */
    profile_add(&p, 2e6, 1000);
    CHECK_DBL(profile_requests(&p, 3e6), 2500, 1e-9);
    CHECK_DBL(profile_due_us(&p, 500), 1e6, 1e-6);
    CHECK_DBL(profile_due_us(&p, 1500), 2e6, 1e-6);
    profile_free(&p);

    profile_init(&p, 500); /* -R 500 --stages 1s:1500,1s:0 */
    profile_add(&p, 1e6, 1500);
    profile_add(&p, 1e6, 0);
    CHECK_DBL(profile_requests(&p, 1e6), 1000, 1e-9);
    CHECK_DBL(profile_requests(&p, 2e6), 1750, 1e-9);
    CHECK_DBL(profile_requests(&p, 5e6), 1750, 1e-9);
    /* down the second ramp: 1500 t - 750 t^2 = 375 at t = 0.2929 s */
    CHECK_DBL(profile_due_us(&p, 1375), 1e6 + (1 - sqrt(0.5)) * 1e6, 1e-3);
    CHECK(isinf(profile_due_us(&p, 1750)));
    profile_free(&p);
}

TEST(a_stage_at_rate_zero_sends_nothing)
{
    struct profile p;
    profile_init(&p, 0);
    profile_add(&p, 1e6, 0); /* 1s:0,1s:100,1s:0,1s:100 (no ramps: 100 holds) */
    profile_add(&p, 0, 100);
    profile_add(&p, 1e6, 100);
    profile_add(&p, 0, 0);
    profile_add(&p, 1e6, 0);
    profile_add(&p, 0, 100);
    profile_add(&p, 1e6, 100);
    CHECK_DBL(profile_requests(&p, 4e6), 200, 1e-9);
    CHECK_DBL(profile_due_us(&p, 0), 1e6, 1e-9); /* not before the first stage ends */
    CHECK_DBL(profile_due_us(&p, 99.5), 1.995e6, 1e-3);
    CHECK_DBL(profile_due_us(&p, 100), 3e6, 1e-9); /* the next after the pause */
    CHECK_DBL(profile_due_us(&p, 150), 3.5e6, 1e-6);
    profile_free(&p);
}

TEST(due_time_inverts_the_count)
{
    struct profile p;
    profile_init(&p, 200);
    profile_add(&p, 1.5e6, 3000);
    profile_add(&p, 0.7e6, 3000);
    profile_add(&p, 2.3e6, 50);
    double total = profile_requests(&p, 4.5e6);
    for (double n = 0.5; n < total; n += 7.3) {
        double t = profile_due_us(&p, n);
        CHECK_DBL(profile_requests(&p, t), n, 1e-6 * n + 1e-6);
    }
    profile_free(&p);
}

/* The live target (volley_target_rate): the rate of the stage at that
 * moment, along a ramp in proportion, and 0 once the stages are over. */
TEST(the_rate_now_follows_the_stages)
{
    struct profile p;
    profile_init(&p, 100);
    profile_add(&p, 1e6, 100); /* a warm-up at -R 100 */
    profile_add(&p, 2e6, 500); /* 2s:500 */
    profile_add(&p, 1e6, 500); /* 1s:500 */
    CHECK_DBL(profile_rate(&p, 0), 100, 0);
    CHECK_DBL(profile_rate(&p, 1e6), 100, 1e-9);
    CHECK_DBL(profile_rate(&p, 2e6), 300, 1e-9);
    CHECK_DBL(profile_rate(&p, 3.5e6), 500, 1e-9);
    CHECK_DBL(profile_rate(&p, 4e6), 0, 0);
    profile_free(&p);
    profile_init(&p, 2000);
    profile_add(&p, INFINITY, 2000);
    CHECK_DBL(profile_rate(&p, 1e12), 2000, 0);
    profile_free(&p);
}
