/* Thread CPU accounting. Linux's /proc/thread-self/schedstat gives both the
 * time on a CPU and the time waiting on a run queue ("run_ns wait_ns
 * timeslices", the sched_info counters); elsewhere only the CPU time is
 * known, from CLOCK_THREAD_CPUTIME_ID.
 * SPDX-License-Identifier: MIT */
#include "cpu.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "clock.h"

static bool read_schedstat(struct cpu_thread *t)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f)
        return false;
    bool ok = fscanf(f, "%" SCNu64 " %" SCNu64, &t->run_ns, &t->wait_ns) == 2;
    fclose(f);
    return ok;
}

void cpu_thread_now(struct cpu_thread *t)
{
    struct timespec ts;
    t->wall_us = clock_us();
    t->has_wait = read_schedstat(t);
    if (t->has_wait)
        return;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    t->run_ns = (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
    t->wait_ns = 0;
}

void cpu_thread_since(const struct cpu_thread *start, const struct cpu_thread *end,
                      struct cpu_busy *b)
{
    double wall = (double)(end->wall_us - start->wall_us) / 1e6;
    b->has_wait = start->has_wait && end->has_wait;
    b->run_s = (double)(end->run_ns - start->run_ns) / 1e9;
    b->wait_s = b->has_wait ? (double)(end->wait_ns - start->wait_ns) / 1e9 : 0;
    b->busy = wall > 0 ? (b->run_s + b->wait_s) / wall : 0;
}
