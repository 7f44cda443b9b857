/* The server's CPU time from /proc/PID/stat: utime and stime (fields 14 and
 * 15, proc(5)) cover every thread of a process, in clock ticks. Processes
 * are matched by name on /proc/PID/comm, which the kernel cuts to 15 bytes.
 * SPDX-License-Identifier: MIT */
#include "server_cpu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xalloc.h"

#define COMM_MAX 15

struct proc {
    pid_t pid, ppid;
    uint64_t utime, stime; /* ticks, as last read */
};

struct server_cpu {
    struct proc *procs;
    pid_t *pids;
    size_t n;
    double tick_s;
};

/* The parent and CPU ticks of pid; false if it is gone. The command name
 * may hold spaces and parentheses, so the fields are counted from the last
 * ')'. */
static bool read_stat(pid_t pid, struct proc *p)
{
    char path[32], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rest = strrchr(buf, ')');
    int ppid;
    unsigned long long utime, stime;
    if (!rest || sscanf(rest + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ppid,
                        &utime, &stime) != 3)
        return false;
    p->pid = pid;
    p->ppid = ppid;
    p->utime = utime;
    p->stime = stime;
    return true;
}

static bool read_comm(pid_t pid, char comm[COMM_MAX + 2])
{
    char path[32];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(comm, COMM_MAX + 2, f) != NULL;
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    return ok;
}

/* Every process now, with its parent. */
static struct proc *all_procs(size_t *n)
{
    DIR *d = opendir("/proc");
    struct proc *procs = NULL;
    size_t cap = 0;
    struct dirent *e;
    *n = 0;
    if (!d)
        die("cannot read /proc for --server-pid: %s", strerror(errno));
    /* readdir() is safe on a stream of one's own (readdir_r is deprecated). */
    /* cppcheck-suppress readdirCalled */
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        if (*n == cap)
            procs = xrealloc(procs, (cap = cap ? 2 * cap : 256) * sizeof *procs);
        if (read_stat((pid_t)atoi(e->d_name), &procs[*n]))
            (*n)++;
    }
    closedir(d);
    return procs;
}

static bool has(const struct server_cpu *s, pid_t pid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->procs[i].pid == pid)
            return true;
    return false;
}

static void add(struct server_cpu *s, const struct proc *p)
{
    if (p->pid == getpid() || has(s, p->pid))
        return;
    s->procs = xrealloc(s->procs, (s->n + 1) * sizeof *s->procs);
    s->procs[s->n++] = *p;
}

/* One PID, or one name: every process of that name. */
static void add_spec(struct server_cpu *s, const char *spec, const struct proc *all, size_t nall)
{
    char comm[COMM_MAX + 2];
    bool found = false;
    if (spec[strspn(spec, "0123456789")] == '\0') {
        struct proc p;
        long pid = strtol(spec, NULL, 10);
        if (pid <= 0 || pid > INT32_MAX || !read_stat((pid_t)pid, &p))
            die("--server-pid %s: no such process", spec);
        add(s, &p);
        return;
    }
    for (size_t i = 0; i < nall; i++) {
        if (all[i].pid != getpid() && read_comm(all[i].pid, comm) &&
            strncmp(comm, spec, COMM_MAX) == 0 && strlen(spec) >= strlen(comm)) {
            add(s, &all[i]);
            found = true;
        }
    }
    if (!found)
        die("--server-pid %s: no process of that name", spec);
}

/* Children of the processes found, and theirs, until none is new. */
static void add_descendants(struct server_cpu *s, const struct proc *all, size_t nall)
{
    size_t before;
    do {
        before = s->n;
        for (size_t i = 0; i < nall; i++)
            if (has(s, all[i].ppid))
                add(s, &all[i]);
    } while (s->n != before);
}

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const struct proc *)a)->pid, y = ((const struct proc *)b)->pid;
    return (x > y) - (x < y);
}

struct server_cpu *server_cpu_open(char *const *specs, size_t n)
{
    struct server_cpu *s = xcalloc(1, sizeof *s);
    size_t nall;
    struct proc *all = all_procs(&nall);
    for (size_t i = 0; i < n; i++) {
        char *copy = xstrdup(specs[i]), *save = NULL;
        for (char *part = strtok_r(copy, ",", &save); part; part = strtok_r(NULL, ",", &save))
            add_spec(s, part, all, nall);
        free(copy);
    }
    add_descendants(s, all, nall);
    free(all);
    if (s->n == 0)
        die("--server-pid: no process to measure");
    qsort(s->procs, s->n, sizeof *s->procs, by_pid);
    s->pids = xmalloc(s->n * sizeof *s->pids);
    for (size_t i = 0; i < s->n; i++)
        s->pids[i] = s->procs[i].pid;
    long hz = sysconf(_SC_CLK_TCK);
    s->tick_s = 1.0 / (double)(hz > 0 ? hz : 100);
    return s;
}

void server_cpu_free(struct server_cpu *s)
{
    if (!s)
        return;
    free(s->procs);
    free(s->pids);
    free(s);
}

void server_cpu_read(struct server_cpu *s, struct server_times *t)
{
    uint64_t user = 0, system = 0;
    for (size_t i = 0; i < s->n; i++) {
        struct proc *p = &s->procs[i], now;
        /* Counters only grow: smaller ones belong to a new process that
         * reused the PID. */
        if (read_stat(p->pid, &now) && now.utime >= p->utime && now.stime >= p->stime) {
            p->utime = now.utime;
            p->stime = now.stime;
        }
        user += p->utime;
        system += p->stime;
    }
    t->user_s = (double)user * s->tick_s;
    t->system_s = (double)system * s->tick_s;
}

size_t server_cpu_pids(const struct server_cpu *s, const pid_t **pids)
{
    *pids = s->pids;
    return s->n;
}
