/* The options of the way the connections take to the target (--proxy,
 * --proxy-env, --bind, --bind-port-range), for cli.c: each parsed into
 * struct config, then checked against the URL and the other options.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CLI_ROUTE_H
#define VOLLEY_CLI_ROUTE_H

#include <stdbool.h>

struct config;

/* What a bad value stops volley with: cli.c's usage error ("volley: ...",
 * a pointer to --help, exit 1), which does not return. */
typedef void (*cli_route_fail)(const char *fmt, ...);

/* --proxy URL. */
void cli_route_proxy(struct config *cfg, const char *url, cli_route_fail fail);
/* --bind LIST. */
void cli_route_bind(struct config *cfg, const char *list, cli_route_fail fail);
/* --bind-port-range LO-HI. */
void cli_route_ports(struct config *cfg, const char *range, cli_route_fail fail);
/* Once the URL and every option are known: with --proxy-env (from_env),
 * the proxy the environment names, said in a note; then what cannot go
 * that way (a Unix socket, HTTP/3 through a proxy, cleartext HTTP/2
 * through an HTTP proxy) stops volley. */
void cli_route_check(struct config *cfg, bool from_env, cli_route_fail fail);

#endif
