/* Through a proxy (--proxy, --proxy-env): which one, how it is reached at
 * start-up, and what it changes in the requests. An https URL goes through
 * an HTTP proxy's CONNECT tunnel, any URL through a SOCKS5 one; an http
 * URL's requests go to an HTTP proxy itself, in absolute-form.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_PROXY_H
#define VOLLEY_PROXY_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "route.h"
#include "tunnel.h"
#include "url.h"

enum proxy_kind {
    PROXY_NONE,
    PROXY_HTTP,
    PROXY_SOCKS5,  /* volley resolves the target's name */
    PROXY_SOCKS5H, /* the proxy does */
};

struct proxy {
    enum proxy_kind kind;
    struct url url; /* with its credentials */
    char *shown;    /* scheme://host:port, without them: for messages and --json */
    struct tunnel tunnel;
    /* An http URL through an HTTP proxy: the requests' absolute-form
     * prefix ("http://host:port") and the Proxy-Authorization field line,
     * or NULL. */
    char *origin;
    char *authorization;
};

/* --proxy URL. False with the reason in why. */
bool proxy_parse(struct proxy *p, const char *text, const char **why);
/* --proxy-env: the proxy the environment names for target (https_proxy or
 * HTTPS_PROXY for https, http_proxy or HTTP_PROXY for http, unless
 * no_proxy or NO_PROXY lists the host), or NULL; *from says which variable
 * decided, for the note that says so. */
const char *proxy_from_env(const struct url *target, const char **from);
/* Whether the requests go to the proxy itself, in absolute-form (an http
 * URL through an HTTP proxy), rather than through a tunnel. */
bool proxy_forwards(const struct proxy *p, const struct url *target);

/* Before the run: resolve the proxy once and probe its addresses in order,
 * as wrk does a target's (each within timeout_us); the first that answers
 * is found. Exits with a one-line message when none does. */
void proxy_find(const struct proxy *p, uint64_t timeout_us, struct net_addr *found);
/* Then, with route's address the proxy's (and its sources ready): build
 * the tunnel (with socks5 the target's name is resolved here), set it in
 * route, and check that a connection gets through, within timeout_us.
 * Exits with a one-line message when the proxy refuses. */
void proxy_check(struct proxy *p, const struct url *target, uint64_t timeout_us,
                 struct route *route);
void proxy_free(struct proxy *p);

/* Through an HTTP proxy: the requests of a batch (len bytes at data) in
 * absolute-form, written to out: each origin-form target ("/p") prefixed
 * with the URL's scheme and authority, and Proxy-Authorization added after
 * each request line when the proxy has credentials and the request has no
 * such field. Bytes that are no request are copied as they are. */
void proxy_absolute_form(const struct proxy *p, const char *data, size_t len, struct buf *out);

#endif
