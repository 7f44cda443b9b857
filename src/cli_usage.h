/* The help texts that cli.c prints: volley's and volley merge's.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CLI_USAGE_H
#define VOLLEY_CLI_USAGE_H

extern const char cli_usage_text[];
extern const char cli_merge_usage_text[];

#endif
