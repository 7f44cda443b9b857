/* The open model's target over time: a request rate made of stages, each a
 * straight line from the rate before it to its own (--stages, -R, the
 * warm-up), and when the n-th request of the whole run is due under it.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_PROFILE_H
#define VOLLEY_PROFILE_H

#include <stddef.h>

struct profile_stage {
    double us;       /* its length; INFINITY for a rate that holds to the end */
    double from, to; /* requests per second at its start and at its end */
    double start_us; /* when it starts */
    double before;   /* requests due before it */
};

struct profile {
    struct profile_stage *stages;
    size_t n;
    double rate; /* where the next stage starts from */
};

/* An empty profile whose first stage starts from rate. */
void profile_init(struct profile *p, double rate);
void profile_free(struct profile *p);
/* A stage of length us (INFINITY: to the end) ramping to rate. */
void profile_add(struct profile *p, double us, double rate);

/* Requests due in the first us of the run: the integral of the rate. */
double profile_requests(const struct profile *p, double us);
/* The target rate at us from the start, requests per second; 0 after
 * the last stage. */
double profile_rate(const struct profile *p, double us);
/* When request n (counting from 0; a fraction is allowed) is due, in us
 * from the start: the latest time by which at most n requests are due, so
 * a stage at rate 0 sends nothing and the first request of a ramp from 0
 * goes at its start. INFINITY when the profile ends first. */
double profile_due_us(const struct profile *p, double n);

#endif
