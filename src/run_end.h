/* How a run ended: the reasons, their names in the files and in warnings,
 * and the members of the --json document's end object and of the
 * timeline's end record.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_RUN_END_H
#define VOLLEY_RUN_END_H

#include <stddef.h>

struct json;

/* How a run ended, for the --json document and the timeline's last record:
 * a result that does not say "completed" covers less than what was asked. */
enum end_reason {
    END_COMPLETED,   /* its -d ran out, or its -n requests were done */
    END_STOPPED,     /* the script stopped every thread (thread:stop(), request() nil) */
    END_INTERRUPTED, /* SIGINT or SIGTERM (the only end of -d 0) */
    END_ABORTED,     /* --abort-on-fail */
    END_SCRIPT_EXIT, /* os.exit() in a hook */
    END_REASONS
};
struct run_end {
    enum end_reason reason;
    int signal; /* END_INTERRUPTED: SIGINT or SIGTERM */
    int status; /* END_SCRIPT_EXIT: the status os.exit() gave */
};
/* "completed", "interrupted", ...: its name in the files. */
const char *run_end_name(enum end_reason reason);
/* "SIGINT", "SIGTERM"; NULL for another signal. */
const char *run_end_signal_name(int signal);
/* How the run ended, for a warning: "was interrupted by SIGINT". */
void run_end_text(const struct run_end *end, char *buf, size_t size);
/* How the run ended, as members of the object being written: reason, signal
 * and exit_status (null when they do not apply). */
void run_end_json(struct json *j, const struct run_end *end);

#endif
