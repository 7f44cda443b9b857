/* The server's CPU time from /proc/PID/stat (proc(5)): utime and stime
 * (fields 14 and 15) cover every thread of a process, cutime and cstime (16
 * and 17) the children it waited for, in clock ticks. Processes are matched
 * by name on /proc/PID/comm, which the kernel cuts to 15 bytes.
 *
 * A server's processes come and go during a run (pre-fork servers recycle
 * their workers), so the total is what the processes measured use now, plus
 * what the ones gone used: a child its parent (measured) waited for is in
 * that parent's cutime and cstime, read again at once so that it counts
 * neither twice nor not at all; one reaped elsewhere counts with what it had
 * used when last read, which the sampling keeps recent. New descendants are
 * looked for as the run goes on.
 * SPDX-License-Identifier: MIT */
#include "server_cpu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "xalloc.h"

#define COMM_MAX 15
/* Looking for new processes reads every /proc/PID/stat: as often as the
 * sampling (a process seen once counts up to its last reading), but not so
 * often that it takes more than a fiftieth of a CPU where there are many. */
#define LOOK_EVERY_US 100000
#define LOOK_COST_SHARE 50
/* The processes named on the start line; the rest are counted. */
#define SHOWN_MAX 16

struct proc {
    pid_t pid, ppid;
    unsigned long long start; /* field 22: tells a reused PID from the process */
    uint64_t utime, stime;    /* its own, ticks, as last read */
    uint64_t cutime, cstime;  /* of the children it waited for */
    bool gone;
    bool handed_over; /* gone, and its time is in its parent's cutime and cstime */
};

struct server_cpu {
    struct proc *procs; /* parents before their children */
    size_t n;
    pid_t *pids; /* every process measured, ascending */
    size_t npids;
    double tick_s;
    uint64_t looked_at;    /* clock_us of the last look for new processes; 0: none */
    uint64_t look_every;   /* us between them */
    uint64_t user, system; /* the highest total read, ticks */
};

/* The parent, CPU ticks and start of pid; false if it is gone. The command
 * name may hold spaces and parentheses, so the fields are counted from the
 * last ')'. */
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
    unsigned long long utime, stime, start;
    long long cutime, cstime;
    if (!rest || sscanf(rest + 1,
                        " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld %*d %*d "
                        "%*d %*d %llu",
                        &ppid, &utime, &stime, &cutime, &cstime, &start) != 6)
        return false;
    *p = (struct proc){.pid = pid,
                       .ppid = ppid,
                       .start = start,
                       .utime = utime,
                       .stime = stime,
                       .cutime = cutime > 0 ? (uint64_t)cutime : 0,
                       .cstime = cstime > 0 ? (uint64_t)cstime : 0};
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

/* Whether pid ignores SIGCHLD: its children are then reaped without their
 * time going to its cutime and cstime (wait(2), NOTES). */
static bool ignores_children(pid_t pid)
{
    char path[32], line[128];
    unsigned long long ignored = 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "SigIgn: %llx", &ignored) == 1)
            break;
    fclose(f);
    return ignored & (1ULL << (SIGCHLD - 1));
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

/* The process measured that is p (the same PID and start), or NULL. */
static struct proc *find(const struct server_cpu *s, const struct proc *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->procs[i].pid == p->pid && s->procs[i].start == p->start)
            return &s->procs[i];
    return NULL;
}

/* The process measured, still there as last read, with that PID. */
static struct proc *find_alive(const struct server_cpu *s, pid_t pid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->procs[i].pid == pid && !s->procs[i].gone)
            return &s->procs[i];
    return NULL;
}

static void add(struct server_cpu *s, const struct proc *p)
{
    if (p->pid == getpid() || find(s, p))
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

static int by_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* Children of the processes measured, and theirs, until none is new; then
 * the list of PIDs again. */
static void add_descendants(struct server_cpu *s, const struct proc *all, size_t nall)
{
    size_t before;
    do {
        before = s->n;
        for (size_t i = 0; i < nall; i++)
            if (find_alive(s, all[i].ppid))
                add(s, &all[i]);
    } while (s->n != before);
    s->pids = xrealloc(s->pids, s->n * sizeof *s->pids);
    s->npids = 0;
    for (size_t i = 0; i < s->n; i++)
        s->pids[s->npids++] = s->procs[i].pid;
    qsort(s->pids, s->npids, sizeof *s->pids, by_pid);
}

/* "Note: --server-pid measures 2 processes and the children they start:
 * 9135 (api), 26952 (api)", so that a name that matched more than meant
 * shows at once. */
static void say_which(const struct server_cpu *s)
{
    char comm[COMM_MAX + 2];
    fprintf(stderr, "Note: --server-pid measures %zu process%s and the children they start:", s->n,
            s->n == 1 ? "" : "es");
    for (size_t i = 0; i < s->npids && i < SHOWN_MAX; i++) {
        if (!read_comm(s->pids[i], comm))
            snprintf(comm, sizeof comm, "?");
        fprintf(stderr, "%s %d (%s)", i ? "," : "", (int)s->pids[i], comm);
    }
    if (s->npids > SHOWN_MAX)
        fprintf(stderr, " and %zu more", s->npids - SHOWN_MAX);
    fputc('\n', stderr);
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
    if (s->n == 0)
        die("--server-pid: no process to measure");
    add_descendants(s, all, nall);
    free(all);
    long hz = sysconf(_SC_CLK_TCK);
    s->tick_s = 1.0 / (double)(hz > 0 ? hz : 100);
    say_which(s);
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

/* p read again; false when it is gone (or its PID is another's now). */
static bool reread(struct proc *p)
{
    struct proc now;
    if (!read_stat(p->pid, &now) || now.start != p->start)
        return false;
    *p = now;
    return true;
}

/* A process that is gone: the parent that waited for it holds its time
 * now, final stretch included, once read again; when no process measured
 * did, what it had used when last read stands. */
static void gone(struct server_cpu *s, struct proc *p)
{
    p->gone = true;
    struct proc *parent = find_alive(s, p->ppid);
    if (parent && !ignores_children(parent->pid)) {
        p->handed_over = true;
        if (!reread(parent))
            gone(s, parent);
    }
}

/* The CPU time this thread has used, us: what a look costs, which a
 * loaded machine would exaggerate on the wall clock. */
static uint64_t thread_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* New descendants, when it is time to look for them. */
static void look(struct server_cpu *s)
{
    uint64_t now = clock_us();
    if (s->looked_at && now - s->looked_at < s->look_every)
        return;
    uint64_t cpu = thread_cpu_us();
    size_t nall;
    struct proc *all = all_procs(&nall);
    add_descendants(s, all, nall);
    free(all);
    uint64_t cost = (thread_cpu_us() - cpu) * LOOK_COST_SHARE;
    s->looked_at = now;
    s->look_every = cost > LOOK_EVERY_US ? cost : LOOK_EVERY_US;
}

void server_cpu_sample(struct server_cpu *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (!s->procs[i].gone && !reread(&s->procs[i]))
            gone(s, &s->procs[i]);
    look(s);
}

void server_cpu_read(struct server_cpu *s, struct server_times *t)
{
    uint64_t user = 0, system = 0;
    server_cpu_sample(s);
    for (size_t i = 0; i < s->n; i++) {
        const struct proc *p = &s->procs[i];
        if (p->handed_over)
            continue;
        user += p->utime + p->cutime;
        system += p->stime + p->cstime;
    }
    /* A child reaped without its time going to its parent's (SA_NOCLDWAIT,
     * which /proc does not show) takes its time with it: the total never
     * goes back, so no interval has less than none. */
    s->user = user > s->user ? user : s->user;
    s->system = system > s->system ? system : s->system;
    t->user_s = (double)s->user * s->tick_s;
    t->system_s = (double)s->system * s->tick_s;
}

size_t server_cpu_pids(const struct server_cpu *s, const pid_t **pids)
{
    *pids = s->pids;
    return s->npids;
}
