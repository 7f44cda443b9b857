/* --server-pid: the CPU time of the server under test, from /proc. The
 * processes are found once, before the run: those given by PID or by name,
 * and their descendants (an nginx master's workers, a wrapper's server).
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
 * names (matched against /proc/PID/comm). Dies with a one-line message when
 * one matches nothing. */
struct server_cpu *server_cpu_open(char *const *specs, size_t n);
void server_cpu_free(struct server_cpu *s);

/* CPU time of the processes, all their threads, since they started. A
 * process that has exited counts with what it had used when last read. */
void server_cpu_read(struct server_cpu *s, struct server_times *t);

/* The processes, in ascending order. */
size_t server_cpu_pids(const struct server_cpu *s, const pid_t **pids);

#endif
