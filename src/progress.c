/* The progress line. It reads the counters each worker publishes at its
 * sample tick (relaxed atomics), so drawing costs the workers nothing. The
 * current rate is taken over the last second rather than the last redraw:
 * the workers publish every 100 ms, which would make a 250 ms rate jump.
 * SPDX-License-Identifier: MIT */
#include "progress.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "units.h"
#include "worker.h"
#include "xalloc.h"

#define REDRAW_INTERVAL 0.25
#define RATE_WINDOW 5 /* redraws: the rate spans the last 4 intervals, 1 s */
#define LINE_SIZE 160

struct progress {
    ev_timer timer;
    struct ev_loop *loop;
    const struct config *cfg;
    struct worker **workers;
    size_t nworkers;
    uint64_t start_us;
    size_t width;                                    /* terminal columns, the line stays within */
    uint64_t at[RATE_WINDOW], requests[RATE_WINDOW]; /* ring of past redraws */
    size_t ticks;
};

/* "3.2s elapsed, 6.8s left: 12345 requests, 4.98k req/s, 0 errors" */
static void format_line(const struct progress *p, char *line, size_t size, uint64_t now,
                        uint64_t requests, uint64_t errors, double rate)
{
    const struct config *cfg = p->cfg;
    double elapsed = (double)(now - p->start_us) / 1e6;
    double left = (double)cfg->duration_us / 1e6 - elapsed;
    char r[UNITS_BUF], of[32] = "";
    if (cfg->requests)
        snprintf(of, sizeof of, "/%" PRIu64, cfg->requests);
    snprintf(line, size,
             "%.1fs elapsed, %.1fs left: %" PRIu64 "%s requests, %s req/s, %" PRIu64 " error%s",
             elapsed, left > 0 ? left : 0, requests, of, units_metric(rate, r), errors,
             errors == 1 ? "" : "s");
}

static void on_redraw(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct progress *p = t->data;
    uint64_t now = clock_us(), requests = 0, errors = 0;
    char line[LINE_SIZE];
    for (size_t i = 0; i < p->nworkers; i++) {
        requests += atomic_load_explicit(&p->workers[i]->live_requests, memory_order_relaxed);
        errors += atomic_load_explicit(&p->workers[i]->live_errors, memory_order_relaxed);
    }
    /* The oldest entry of the ring, or the start while it fills. */
    size_t slot = p->ticks % RATE_WINDOW;
    uint64_t since = p->ticks >= RATE_WINDOW ? p->at[slot] : p->start_us;
    uint64_t before = p->ticks >= RATE_WINDOW ? p->requests[slot] : 0;
    double rate = now > since ? (double)(requests - before) * 1e6 / (double)(now - since) : 0;
    p->at[slot] = now;
    p->requests[slot] = requests;
    p->ticks++;

    format_line(p, line, sizeof line, now, requests, errors, rate);
    /* One write per redraw, so the terminal never shows half a line; cut to
     * the terminal's width, since a wrapped line cannot be redrawn by \r. */
    fprintf(stderr, "\r%.*s\033[K", (int)p->width, line);
}

static size_t terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
        return ws.ws_col - 1;
    return 79;
}

struct progress *progress_start(struct ev_loop *loop, const struct config *cfg,
                                struct worker **workers, size_t nworkers, uint64_t start_us)
{
    if (!cfg->progress || !isatty(STDERR_FILENO))
        return NULL;
    struct progress *p = xcalloc(1, sizeof *p);
    p->loop = loop;
    p->cfg = cfg;
    p->workers = workers;
    p->nworkers = nworkers;
    p->start_us = start_us;
    p->width = terminal_width();
    ev_timer_init(&p->timer, on_redraw, REDRAW_INTERVAL, REDRAW_INTERVAL);
    p->timer.data = p;
    ev_timer_start(loop, &p->timer);
    return p;
}

void progress_end(struct progress *p)
{
    if (!p)
        return;
    ev_timer_stop(p->loop, &p->timer);
    if (p->ticks)
        fputs("\r\033[K", stderr);
    free(p);
}
