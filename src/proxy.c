/* The proxy a run goes through: its URL (from --proxy or, with
 * --proxy-env, the environment, as curl reads it), finding it and checking
 * the way through it before the run, and the absolute-form requests an
 * HTTP proxy is sent for an http URL (RFC 9112 §3.2.2).
 * SPDX-License-Identifier: MIT */
#include "proxy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "http.h"
#include "http_request.h"
#include "transport.h"
#include "xalloc.h"

bool proxy_parse(struct proxy *p, const char *text, const char **why)
{
    memset(p, 0, sizeof *p);
    if (!url_parse_proxy(text, &p->url, why))
        return false;
    const char *scheme = p->url.scheme;
    p->kind = strcasecmp(scheme, "http") == 0     ? PROXY_HTTP
              : strcasecmp(scheme, "socks5") == 0 ? PROXY_SOCKS5
                                                  : PROXY_SOCKS5H;
    bool v6 = strchr(p->url.host, ':') != NULL;
    p->shown = xasprintf("%s://%s%s%s:%s",
                         p->kind == PROXY_HTTP     ? "http"
                         : p->kind == PROXY_SOCKS5 ? "socks5"
                                                   : "socks5h",
                         v6 ? "[" : "", p->url.host, v6 ? "]" : "", p->url.service);
    return true;
}

bool proxy_forwards(const struct proxy *p, const struct url *target)
{
    return p->kind == PROXY_HTTP && !target->tls;
}

void proxy_free(struct proxy *p)
{
    url_free(&p->url);
    free(p->shown);
    tunnel_free(&p->tunnel);
    free(p->origin);
    free(p->authorization);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------------ */
/* The environment                                                            */
/* ------------------------------------------------------------------------ */

static const char *env(const char *lower, const char *upper, const char **from)
{
    const char *v = getenv(lower);
    *from = lower;
    if (!v || !*v) {
        v = getenv(upper);
        *from = upper;
    }
    return v && *v ? v : NULL;
}

/* Whether the IP literal host is in the range "ADDRESS/PREFIX". */
static bool in_range(const char *host, const char *entry, size_t len)
{
    char net_text[INET6_ADDRSTRLEN];
    unsigned char addr[16], net[16];
    const char *slash = memchr(entry, '/', len);
    size_t n = slash ? (size_t)(slash - entry) : len;
    int family = memchr(entry, ':', n) ? AF_INET6 : AF_INET;
    size_t bits = family == AF_INET6 ? 128 : 32;
    long prefix = (long)bits;
    if (n >= sizeof net_text)
        return false;
    memcpy(net_text, entry, n);
    net_text[n] = '\0';
    if (slash) {
        char digits[8] = "";
        size_t d = len - n - 1;
        if (d == 0 || d >= sizeof digits)
            return false;
        memcpy(digits, slash + 1, d);
        char *end;
        prefix = strtol(digits, &end, 10);
        if (*end || prefix < 0 || (size_t)prefix > bits)
            return false;
    }
    if (inet_pton(family, host, addr) != 1 || inet_pton(family, net_text, net) != 1)
        return false;
    for (long b = 0; b < prefix; b++) {
        unsigned char mask = (unsigned char)(0x80u >> (b % 8));
        if ((addr[b / 8] & mask) != (net[b / 8] & mask))
            return false;
    }
    return true;
}

/* no_proxy as curl reads it: "*", or names and addresses separated by
 * commas or spaces; a name matches itself and its subdomains (with or
 * without a leading dot), an address or ADDRESS/PREFIX the IP literals in
 * it. */
static bool excluded(const char *host, const char *list)
{
    size_t host_len = strlen(host);
    for (const char *p = list; *p;) {
        p += strspn(p, ", \t");
        size_t len = strcspn(p, ", \t");
        const char *entry = p;
        p += len;
        if (len == 1 && entry[0] == '*')
            return true;
        if (len && entry[0] == '.') {
            entry++;
            len--;
        }
        if (!len)
            continue;
        if (in_range(host, entry, len))
            return true;
        if (host_len >= len && strncasecmp(host + host_len - len, entry, len) == 0 &&
            (host_len == len || host[host_len - len - 1] == '.'))
            return true;
    }
    return false;
}

const char *proxy_from_env(const struct url *target, const char **from)
{
    const char *no = getenv("no_proxy");
    if (!no || !*no)
        no = getenv("NO_PROXY");
    const char *v = target->tls ? env("https_proxy", "HTTPS_PROXY", from)
                                : env("http_proxy", "HTTP_PROXY", from);
    if (v && no && excluded(target->host, no)) {
        *from = getenv("no_proxy") && *getenv("no_proxy") ? "no_proxy" : "NO_PROXY";
        return NULL;
    }
    return v;
}

/* ------------------------------------------------------------------------ */
/* Before the run                                                             */
/* ------------------------------------------------------------------------ */

/* poll() takes an int, and a negative one means forever. */
static int timeout_ms(uint64_t timeout_us)
{
    uint64_t ms = timeout_us / 1000;
    return ms == 0 ? 1 : ms > INT_MAX ? INT_MAX : (int)ms;
}

void proxy_find(const struct proxy *p, uint64_t timeout_us, struct net_addr *found)
{
    struct net_addr *addrs;
    size_t n;
    const char *why;
    int err = 0;
    if (!net_lookup(p->url.host, p->url.service, &addrs, &n, &why))
        die("unable to resolve the proxy %s: %s", p->shown, why);
    for (size_t i = 0; i < n; i++) {
        if ((err = net_probe(&addrs[i], timeout_ms(timeout_us))) == 0) {
            *found = addrs[i];
            free(addrs);
            return;
        }
    }
    free(addrs);
    die("unable to connect to the proxy %s: %s", p->shown, strerror(err));
}

/* Absolute-form's prefix, and the credentials every request carries. */
static void forwarding(struct proxy *p, const struct url *target)
{
    char *host = url_host_header(target);
    p->origin = xasprintf("http://%s", host);
    free(host);
    if (p->url.user) {
        struct buf b = {0};
        char *pair = xasprintf("%s:%s", p->url.user, p->url.password ? p->url.password : "");
        const char *name = "Proxy-Authorization: Basic ";
        buf_append(&b, name, strlen(name));
        buf_append_base64(&b, pair, strlen(pair));
        buf_append(&b, "\r\n", 3); /* with its NUL */
        p->authorization = b.data;
        free(pair);
    }
}

/* The connection the check opens, then closed: false with the reason. */
static bool dial(const struct route *route, uint64_t timeout_us, char *why, size_t len)
{
    int fd = route_dial(route, clock_us() + timeout_us, why, len);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* SOCKS5: the target's name resolved here, its addresses tried through the
 * proxy in order as wrk probes them; the first it reaches is the run's. */
static void socks5_resolved(struct proxy *p, const struct url *target, uint64_t timeout_us,
                            struct route *route)
{
    struct net_addr *addrs;
    size_t n;
    const char *why;
    char reason[256] = "no address";
    if (!net_lookup(target->host, target->service, &addrs, &n, &why))
        die("unable to resolve %s:%s: %s", target->host, target->service, why);
    for (size_t i = 0; i < n; i++) {
        tunnel_free(&p->tunnel);
        tunnel_socks5(&p->tunnel, target->host, target->service, &addrs[i], p->url.user,
                      p->url.password, &why);
        route->tunnel = &p->tunnel;
        if (dial(route, timeout_us, reason, sizeof reason)) {
            free(addrs);
            return;
        }
    }
    free(addrs);
    die("unable to connect to %s:%s through %s: %s", target->host, target->service, p->shown,
        reason);
}

/* A CONNECT tried as the check of an http URL's way through an HTTP proxy,
 * which is then sent the requests themselves: credentials it refuses, or a
 * target it cannot reach (a 5xx), stop the run; a proxy that forwards
 * requests but allows no tunnel to the port (403, 405) does not. */
static void check_forwarding(struct proxy *p, const struct url *target, uint64_t timeout_us,
                             struct route *route)
{
    char why[256];
    struct tunnel probe;
    struct tunnel_conn tc;
    enum cause cause;
    int rc;
    tunnel_http(&probe, target->host, target->service, p->url.user, p->url.password);
    route->tunnel = NULL;
    int fd = route_dial(route, clock_us() + timeout_us, why, sizeof why);
    if (fd < 0) {
        tunnel_free(&probe);
        die("unable to connect to %s:%s through %s: %s", target->host, target->service, p->shown,
            why);
    }
    rc = tunnel_wait(&probe, &tc, fd, clock_us() + timeout_us, &cause);
    close(fd);
    if (rc == IO_ERROR && (cause == CAUSE_PROXY_AUTH || cause == CAUSE_PROXY_PROTOCOL ||
                           (cause == CAUSE_PROXY_STATUS && tc.status >= 500))) {
        tunnel_failure(&probe, &tc, cause, why, sizeof why);
        tunnel_free(&probe);
        die("unable to connect to %s:%s through %s: %s", target->host, target->service, p->shown,
            why);
    }
    tunnel_free(&probe);
}

void proxy_check(struct proxy *p, const struct url *target, uint64_t timeout_us,
                 struct route *route)
{
    char why[256];
    const char *reason;
    route->proxy = p->shown;
    route->tunnel = &p->tunnel;
    switch (p->kind) {
    case PROXY_HTTP:
        if (proxy_forwards(p, target)) {
            forwarding(p, target);
            check_forwarding(p, target, timeout_us, route);
            return;
        }
        tunnel_http(&p->tunnel, target->host, target->service, p->url.user, p->url.password);
        break;
    case PROXY_SOCKS5:
        socks5_resolved(p, target, timeout_us, route);
        return;
    default:
        if (!tunnel_socks5(&p->tunnel, target->host, target->service, NULL, p->url.user,
                           p->url.password, &reason))
            die("--proxy %s: %s", p->shown, reason);
        break;
    }
    if (!dial(route, timeout_us, why, sizeof why))
        die("unable to connect to %s:%s through %s: %s", target->host, target->service, p->shown,
            why);
}

/* ------------------------------------------------------------------------ */
/* Absolute-form                                                              */
/* ------------------------------------------------------------------------ */

static bool has_field(const struct http_request_info *info, const char *name)
{
    const char *n, *v;
    size_t pos = 0, n_len, v_len, len = strlen(name);
    while (http_field_next(info->fields, info->fields_len, &pos, &n, &n_len, &v, &v_len))
        if (n_len == len && strncasecmp(n, name, len) == 0)
            return true;
    return false;
}

void proxy_absolute_form(const struct proxy *p, const char *data, size_t len, struct buf *out)
{
    struct http_request_info info;
    size_t pos = 0, from = 0;
    buf_clear(out);
    while (http_request_next(data, len, &pos, &info)) {
        const char *target = info.target;
        /* The scheme and authority go before a path; OPTIONS * asks about
         * the server as a whole, and becomes them alone (RFC 9112 §3.2.4).
         * A target in absolute form already is left alone. */
        bool asterisk = info.target_len == 1 && target[0] == '*';
        buf_append(out, data + from, (size_t)(target - (data + from)));
        if (target[0] == '/' || asterisk)
            buf_append(out, p->origin, strlen(p->origin));
        target += asterisk;
        buf_append(out, target, (size_t)(info.fields - target));
        if (p->authorization && !has_field(&info, "Proxy-Authorization"))
            buf_append(out, p->authorization, strlen(p->authorization));
        buf_append(out, info.fields, (size_t)(data + pos - info.fields));
        from = pos;
    }
    buf_append(out, data + from, len - from);
    buf_append(out, "", 1);
    out->len--; /* NUL-terminated, as request bytes are */
}
