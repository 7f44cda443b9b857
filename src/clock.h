/* The one clock volley measures with: monotonic, in microseconds. Wall-clock
 * time can jump; latency must not.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CLOCK_H
#define VOLLEY_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

#endif
