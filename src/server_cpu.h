/* --server-pid: the CPU time of the server under test, from /proc. The
 * processes are those given by PID or by name and their descendants, found
 * before the run and looked for again as it goes on; the children they wait
 * for count through their cutime and cstime, however briefly they lived.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SERVER_CPU_H
#define VOLLEY_SERVER_CPU_H

#include <stddef.h>
#include <sys/types.h>

struct server_cpu;

struct server_times {
    double user_s, system_s;
};

/* specs: PIDs ("1234", or "1234,1235" as pgrep -d, prints them) or process
 * names (matched against /proc/PID/comm). Says on stderr, in one line, which
 * processes it found; dies with a one-line message when one matches
 * nothing. */
struct server_cpu *server_cpu_open(char *const *specs, size_t n);
void server_cpu_free(struct server_cpu *s);

/* CPU time of the processes, all their threads and the children they
 * waited for, since they started. A process that has exited counts with
 * what it had used when last read, unless a process measured waited for
 * it. Never less than the time read before. */
void server_cpu_read(struct server_cpu *s, struct server_times *t);
/* Reads the processes again, and looks for new descendants (every 100 ms,
 * less often where /proc is large), without a total: a process that exits
 * without a parent measured to wait for it counts up to the last reading. */
void server_cpu_sample(struct server_cpu *s);

/* Every process measured so far, in ascending order. */
size_t server_cpu_pids(const struct server_cpu *s, const pid_t **pids);

#endif
