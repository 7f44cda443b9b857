/* How busy a thread was: CPU time, and time spent runnable but waiting for a
 * CPU. Both mean the thread could not get to its next event when it was due,
 * so together they tell whether a worker, rather than the server, set the
 * pace of its connections.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CPU_H
#define VOLLEY_CPU_H

#include <stdbool.h>
#include <stdint.h>

struct cpu_thread {
    uint64_t wall_us; /* clock_us() */
    uint64_t run_ns;  /* on a CPU */
    uint64_t wait_ns; /* runnable, waiting for a CPU (0 when unknown) */
    bool has_wait;    /* the kernel reports waiting time (Linux schedstat) */
};

/* The calling thread's counters now. */
void cpu_thread_now(struct cpu_thread *t);

/* What a thread did between two samples: busy is (run + wait) / wall. */
struct cpu_busy {
    double busy;
    double run_s, wait_s;
    bool has_wait;
};
void cpu_thread_since(const struct cpu_thread *start, const struct cpu_thread *end,
                      struct cpu_busy *b);

#endif
