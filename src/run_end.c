/* How a run ended, by name.
 * SPDX-License-Identifier: MIT */
#include "run_end.h"

#include <signal.h>
#include <stdio.h>

#include "json.h"

static const char *const end_names[END_REASONS] = {"completed", "stopped", "interrupted", "aborted",
                                                   "script_exit"};

const char *run_end_name(enum end_reason reason) { return end_names[reason]; }

const char *run_end_signal_name(int signal)
{
    return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : NULL;
}

void run_end_text(const struct run_end *end, char *buf, size_t size)
{
    const char *sig = run_end_signal_name(end->signal);
    switch (end->reason) {
    case END_COMPLETED:
    case END_REASONS:
        snprintf(buf, size, "completed");
        break;
    case END_STOPPED:
        snprintf(buf, size, "was stopped by its script (every thread stopped)");
        break;
    case END_INTERRUPTED:
        snprintf(buf, size, "was interrupted by %s", sig ? sig : "a signal");
        break;
    case END_ABORTED:
        snprintf(buf, size, "was stopped by --abort-on-fail");
        break;
    case END_SCRIPT_EXIT:
        snprintf(buf, size, "was stopped by its script's os.exit(%d)", end->status);
        break;
    }
}

void run_end_json(struct json *j, const struct run_end *end)
{
    const char *sig = run_end_signal_name(end->signal);
    json_string(j, "reason", run_end_name(end->reason));
    if (end->reason == END_INTERRUPTED && sig)
        json_string(j, "signal", sig);
    else
        json_null(j, "signal");
    /* what the process exits with, as the shell sees it */
    if (end->reason == END_SCRIPT_EXIT)
        json_uint(j, "exit_status", (unsigned)end->status & 0xff);
    else
        json_null(j, "exit_status");
}
