/* The progress line. It reads the counters each worker publishes at its
 * sample tick (relaxed atomics), so drawing costs the workers nothing, and
 * the rate and p99 latency of the last interval the timeline wrote.
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
#include "timeline.h"
#include "units.h"
#include "worker.h"
#include "xalloc.h"

#define REDRAW_INTERVAL 0.25
#define LINE_SIZE 192

struct progress {
    ev_timer timer;
    struct ev_loop *loop;
    const struct config *cfg;
    struct worker **workers;
    size_t nworkers;
    const struct timeline *timeline;
    uint64_t start_us;
    size_t width; /* terminal columns, the line stays within */
    bool drawn;
};

/* "3.2s elapsed, 6.8s left: 12345 requests, 4.98k req/s, p99 1.23ms, 0 errors";
 * with -n "12345/100000 requests", and no time left without -d (or -d 0). */
static void format_line(const struct progress *p, char *line, size_t size, uint64_t now,
                        uint64_t requests, uint64_t errors)
{
    const struct config *cfg = p->cfg;
    double elapsed = (double)(now - p->start_us) / 1e6;
    /* the warm-up comes first */
    double left = (double)(cfg->spec.time_limit_us + cfg->spec.warmup_us) / 1e6 - elapsed, rate;
    char r[UNITS_BUF], l[UNITS_BUF] = "-", when[48], of[32] = "";
    uint64_t p99;
    bool has_p99 = false;
    /* Until the first interval is written, the rate so far. */
    if (!timeline_last(p->timeline, &rate, &p99, &has_p99))
        rate = elapsed > 0 ? (double)requests / elapsed : 0;
    if (has_p99)
        units_time_us(p99, l);
    if (cfg->spec.time_limit_us)
        snprintf(when, sizeof when, "%.1fs elapsed, %.1fs left", elapsed, left > 0 ? left : 0);
    else if (cfg->spec.requests)
        snprintf(when, sizeof when, "%.1fs elapsed", elapsed);
    else
        snprintf(when, sizeof when, "%.1fs elapsed, until Ctrl-C", elapsed);
    if (cfg->spec.requests)
        snprintf(of, sizeof of, "/%" PRIu64, cfg->spec.requests);
    snprintf(line, size, "%s: %" PRIu64 "%s requests, %s req/s, p99 %s, %" PRIu64 " error%s", when,
             requests, of, units_metric(rate, r), l, errors, errors == 1 ? "" : "s");
}

static void on_redraw(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct progress *p = t->data;
    uint64_t requests = 0, errors = 0;
    char line[LINE_SIZE];
    for (size_t i = 0; i < p->nworkers; i++) {
        uint64_t n, e;
        worker_live(p->workers[i], &n, &e);
        requests += n;
        errors += e;
    }
    format_line(p, line, sizeof line, clock_us(), requests, errors);
    /* One write per redraw, so the terminal never shows half a line; cut to
     * the terminal's width, since a wrapped line cannot be redrawn by \r. */
    fprintf(stderr, "\r%.*s\033[K", (int)p->width, line);
    p->drawn = true;
}

static size_t terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
        return ws.ws_col - 1;
    return 79;
}

struct progress *progress_start(struct ev_loop *loop, const struct config *cfg,
                                struct worker **workers, size_t nworkers, uint64_t start_us,
                                const struct timeline *timeline)
{
    if (!cfg->progress || !isatty(STDERR_FILENO))
        return NULL;
    struct progress *p = xcalloc(1, sizeof *p);
    p->loop = loop;
    p->cfg = cfg;
    p->workers = workers;
    p->nworkers = nworkers;
    p->start_us = start_us;
    p->timeline = timeline;
    p->width = terminal_width();
    ev_timer_init(&p->timer, on_redraw, REDRAW_INTERVAL, REDRAW_INTERVAL);
    p->timer.data = p;
    ev_timer_start(loop, &p->timer);
    return p;
}

bool progress_countdown_wanted(const struct config *cfg)
{
    return cfg->progress && isatty(STDERR_FILENO);
}

void progress_countdown(uint64_t left_us)
{
    static bool drawn;
    if (left_us) {
        /* whole seconds, rounded up: "1s" until the start */
        fprintf(stderr, "\rstarting in %" PRIu64 "s\033[K", (left_us + 999999) / 1000000);
        drawn = true;
    } else if (drawn) {
        fputs("\r\033[K", stderr);
        drawn = false;
    }
}

void progress_end(struct progress *p)
{
    if (!p)
        return;
    ev_timer_stop(p->loop, &p->timer);
    if (p->drawn)
        fputs("\r\033[K", stderr);
    free(p);
}
