/* --proxy, --proxy-env, --bind and --bind-port-range: the proxy (proxy.c)
 * and the source addresses (sources.c) they name, in struct config and the
 * run spec, and the combinations that cannot work, refused before the run.
 * SPDX-License-Identifier: MIT */
#include "cli_route.h"

#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "h1.h"
#include "proxy.h"
#include "sources.h"
#include "spec.h"
#include "xalloc.h"

static void set_string(char **field, const char *value)
{
    free(*field);
    *field = xstrdup(value);
}

/* The proxy of --proxy, or of the environment (from names which). */
static void set_proxy(struct config *cfg, const char *text, const char *from, cli_route_fail fail)
{
    const char *why;
    proxy_free(&cfg->proxy);
    if (!proxy_parse(&cfg->proxy, text, &why))
        fail("invalid %s '%s': %s", from, text, why);
    set_string(&cfg->spec.proxy, cfg->proxy.shown);
}

void cli_route_proxy(struct config *cfg, const char *url, cli_route_fail fail)
{
    set_proxy(cfg, url, "--proxy", fail);
}

/* --proxy-env: what the environment says, in a note (a proxy is never taken
 * from it unasked, nor silently). */
static void proxy_env(struct config *cfg, cli_route_fail fail)
{
    const char *from;
    const char *text = proxy_from_env(&cfg->url, &from);
    if (text) {
        set_proxy(cfg, text, from, fail);
        fprintf(stderr, "Note: --proxy-env: through %s (%s)\n", cfg->proxy.shown, from);
    } else if (getenv(from) && *getenv(from)) {
        fprintf(stderr, "Note: --proxy-env: not through a proxy (%s lists %s)\n", from,
                cfg->url.host);
    } else {
        fprintf(stderr, "Note: --proxy-env: not through a proxy (%s is not set)\n", from);
    }
}

void cli_route_bind(struct config *cfg, const char *list, cli_route_fail fail)
{
    char why[128];
    struct sources s = {0};
    if (!sources_parse(&s, list, why, sizeof why)) {
        sources_free(&s);
        fail("invalid --bind '%s': %s", list, why);
    }
    s.lo = cfg->sources.lo;
    s.hi = cfg->sources.hi;
    sources_free(&cfg->sources);
    cfg->sources = s;
    set_string(&cfg->spec.bind, list);
}

void cli_route_ports(struct config *cfg, const char *range, cli_route_fail fail)
{
    if (!sources_parse_ports(&cfg->sources, range))
        fail("invalid --bind-port-range '%s': expected LO-HI, ports 1 to 65535", range);
    set_string(&cfg->spec.bind_ports, range);
}

void cli_route_check(struct config *cfg, bool from_env, cli_route_fail fail)
{
    if (from_env && cfg->spec.proxy)
        fail("--proxy and --proxy-env: give one of them");
    if (cfg->spec.unix_socket &&
        (cfg->spec.proxy || from_env || cfg->spec.bind || cfg->spec.bind_ports))
        fail("--unix-socket does not combine with --proxy, --proxy-env, --bind or "
             "--bind-port-range");
    if (from_env)
        proxy_env(cfg, fail);
    /* HTTP and SOCKS5 proxies' CONNECT carry a TCP stream, and QUIC is UDP. */
    if (cfg->proxy.kind && spec_quic(&cfg->spec))
        fail("%s cannot go through a proxy (%s): QUIC runs over UDP, and HTTP and SOCKS5 "
             "CONNECT tunnels carry TCP",
             cfg->protocol_option, cfg->proxy.shown);
    /* An HTTP proxy forwards http requests in HTTP/1.1; HTTP/2 with prior
     * knowledge would go to the proxy itself. */
    if (proxy_forwards(&cfg->proxy, &cfg->url) && spec_only_protocol(&cfg->spec) != &proto_h1)
        fail("%s: cleartext HTTP/2 (h2c) cannot go through an HTTP proxy: use an https "
             "URL, or a socks5 proxy",
             cfg->protocol_option);
}
