/* The text report, line for line as wrk prints it (wrk-spec §2).
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_REPORT_H
#define VOLLEY_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "stats.h"

struct config;

/* What a finished run measured. */
struct result {
    const struct config *cfg;
    uint64_t runtime_us;
    size_t pipeline;    /* requests per batch */
    struct stats stats; /* all workers merged */
};

/* "Running 10s test @ URL" and "  2 threads and 10 connections". */
void report_header(FILE *f, const struct config *cfg);
void report_text(FILE *f, const struct result *r);

/* With -R, when fewer requests went out than asked for: one line saying so
 * and why (too few connections for the server's response time, errors, or
 * the generator itself). Nothing otherwise. */
void report_rate_shortfall(FILE *f, const struct result *r);

/* One stat cell: s right-aligned and truncated so that decimal points line
 * up whatever the unit's length (wrk's print_units). */
void report_cell(FILE *f, const char *s, int width);

#endif
