/* Rate profiles. Within a stage the rate is r(t) = a + (b - a) t / d, so
 * the requests due after t are a t + (b - a) t^2 / 2d; the time of the
 * m-th is the root of that quadratic, taken in the form without
 * cancellation, which also holds when a is 0 or the ramp goes down.
 * SPDX-License-Identifier: MIT */
#include "profile.h"

#include <math.h>
#include <stdlib.h>

#include "xalloc.h"

void profile_init(struct profile *p, double rate)
{
    p->stages = NULL;
    p->n = 0;
    p->rate = rate;
}

void profile_free(struct profile *p)
{
    free(p->stages);
    p->stages = NULL;
    p->n = 0;
}

/* Requests due in a stage's first us. */
static double stage_requests(const struct profile_stage *s, double us)
{
    if (us <= 0 || (s->from == 0 && s->to == 0))
        return 0;
    if (s->from == s->to) /* also the stage without end */
        return s->from * us / 1e6;
    double t = us / 1e6, d = s->us / 1e6;
    return s->from * t + (s->to - s->from) * t * t / (2 * d);
}

void profile_add(struct profile *p, double us, double rate)
{
    p->stages = xrealloc(p->stages, (p->n + 1) * sizeof *p->stages);
    struct profile_stage *s = &p->stages[p->n], *last = p->n ? s - 1 : NULL;
    *s = (struct profile_stage){
        .us = us,
        /* a rate that holds to the end cannot ramp: it has no end to ramp to */
        .from = isinf(us) ? rate : p->rate,
        .to = rate,
        .start_us = last ? last->start_us + last->us : 0,
        .before = last ? last->before + stage_requests(last, last->us) : 0,
    };
    p->n++;
    p->rate = rate;
}

double profile_requests(const struct profile *p, double us)
{
    for (size_t i = 0; i < p->n; i++) {
        const struct profile_stage *s = &p->stages[i];
        if (us < s->start_us + s->us)
            return s->before + stage_requests(s, us - s->start_us);
    }
    if (!p->n)
        return 0;
    const struct profile_stage *last = &p->stages[p->n - 1];
    return last->before + stage_requests(last, last->us);
}

double profile_rate(const struct profile *p, double us)
{
    for (size_t i = 0; i < p->n; i++) {
        const struct profile_stage *s = &p->stages[i];
        if (us < s->start_us + s->us) {
            if (s->from == s->to) /* also the stage without end */
                return s->from;
            double at = us > s->start_us ? us - s->start_us : 0;
            return s->from + (s->to - s->from) * at / s->us;
        }
    }
    return 0;
}

/* The time into stage s at which m of its requests are due (0 <= m and
 * fewer than the stage holds). */
static double stage_time_us(const struct profile_stage *s, double m)
{
    double a = s->from, b = s->to;
    if (m <= 0)
        return 0;
    if (a == b)
        return m / a * 1e6;
    double d = s->us / 1e6;
    double disc = a * a + 2 * (b - a) * m / d;
    return 2 * m / (a + sqrt(disc > 0 ? disc : 0)) * 1e6;
}

double profile_due_us(const struct profile *p, double n)
{
    for (size_t i = 0; i < p->n; i++) {
        const struct profile_stage *s = &p->stages[i];
        /* the first stage by whose end more than n are due */
        if (n < s->before + stage_requests(s, s->us))
            return s->start_us + stage_time_us(s, n - s->before);
    }
    return INFINITY;
}
