/* URL parsing for the benchmark target: scheme://[userinfo@]host[:port][path].
 * Only http and https are accepted; the path keeps the query as typed, and the
 * fragment is left out, as browsers and curl do (RFC 9110 §4.2.4: it is not
 * sent; wrk sends it, and servers answer 404). A proxy's URL (--proxy) has the
 * same form with its own schemes, and keeps its credentials.
 * SPDX-License-Identifier: MIT */
#include "url.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xalloc.h"

static bool valid_reg_name(const char *s, size_t n)
{
    if (n == 0)
        return false;
    /* RFC 3986 reg-name characters; percent-encoding is left as typed. */
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("-._~%!$&'()*+,;=", s[i]))
            return false;
    return true;
}

static int hex_value(char c)
{
    return isdigit((unsigned char)c)    ? c - '0'
           : isxdigit((unsigned char)c) ? tolower((unsigned char)c) - 'a' + 10
                                        : -1;
}

/* An IPv6 literal, with a zone (interface) after '%' for link-local
 * addresses. RFC 6874 writes it "fe80::1%25eth0" in a URL, percent-encoded;
 * the raw form "fe80::1%eth0" is accepted too. Returns the address as
 * getaddrinfo takes it ("fe80::1%eth0"), or NULL. */
static char *ipv6_host(const char *s, size_t n)
{
    char buf[64];
    struct in6_addr a;
    const char *zone = memchr(s, '%', n), *end = s + n;
    size_t len = zone ? (size_t)(zone - s) : n;
    if (len == 0 || len >= sizeof buf)
        return NULL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET6, buf, &a) != 1)
        return NULL;
    if (!zone)
        return xstrndup(s, n);
    const char *in = zone + 1;
    if (end - in >= 2 && memcmp(in, "25", 2) == 0)
        in += 2;
    if (in == end)
        return NULL;
    char *host = xmalloc(n + 1), *out = host + len;
    memcpy(host, s, len);
    *out++ = '%';
    while (in < end) {
        int hi, lo;
        if (*in == '%' && end - in >= 3 && (hi = hex_value(in[1])) >= 0 &&
            (lo = hex_value(in[2])) >= 0) {
            *out = (char)(hi << 4 | lo);
            in += 3;
        } else {
            *out = *in++;
        }
        /* An interface name: no spaces, controls or separators. */
        if ((unsigned char)*out <= ' ' || *out == 0x7f || strchr("%/?#[]@", *out)) {
            free(host);
            return NULL;
        }
        out++;
    }
    *out = '\0';
    return host;
}

static bool valid_port(const char *s, size_t n)
{
    if (n == 0 || n > 5)
        return false;
    unsigned long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    return v >= 1 && v <= 65535;
}

/* What a kind of URL accepts: its schemes (the first is https when TLS
 * is one), the message for others, and the port when none is given. */
struct url_kind {
    const char *const *schemes;
    const char *unsupported;
    const char *default_port; /* NULL: the scheme's (80, 443) */
    bool credentials;         /* the userinfo is kept (else ignored) */
};

static const char *const target_schemes[] = {"http", "https", NULL};
static const char *const proxy_schemes[] = {"http", "socks5", "socks5h", NULL};
static const struct url_kind target = {target_schemes, "unsupported scheme (use http or https)",
                                       NULL, false};
/* curl's default for every kind of proxy. */
static const struct url_kind proxy = {
    proxy_schemes, "unsupported proxy scheme (use http, socks5 or socks5h)", "1080", true};

static bool parse_scheme(const char *s, struct url *u, const struct url_kind *kind,
                         const char **rest, const char **why)
{
    const char *sep = strstr(s, "://");
    if (!sep || sep == s) {
        *why = "expected scheme://host[:port][/path]";
        return false;
    }
    for (const char *p = s; p < sep; p++)
        if (!isalnum((unsigned char)*p) && !strchr("+-.", *p)) {
            *why = "expected scheme://host[:port][/path]";
            return false;
        }
    u->scheme = xstrndup(s, (size_t)(sep - s));
    size_t i = 0;
    while (kind->schemes[i] && strcasecmp(u->scheme, kind->schemes[i]) != 0)
        i++;
    if (!kind->schemes[i]) {
        *why = kind->unsupported;
        return false;
    }
    u->tls = strcmp(kind->schemes[i], "https") == 0;
    *rest = sep + 3;
    return true;
}

/* userinfo = user [":" password], each percent-decoded; no control
 * characters, which could not go in a header or a SOCKS5 request. */
static char *userinfo_part(const char *s, size_t n)
{
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = hex_value(s[i + 1])) >= 0 &&
            (lo = hex_value(s[i + 2])) >= 0) {
            *o = (char)(hi << 4 | lo);
            i += 2;
        } else {
            *o = s[i];
        }
        if ((unsigned char)*o < ' ' || *o == 0x7f) {
            free(out);
            return NULL;
        }
        o++;
    }
    *o = '\0';
    return out;
}

static bool parse_userinfo(const char *s, size_t n, struct url *u, const char **why)
{
    const char *colon = memchr(s, ':', n);
    size_t user_len = colon ? (size_t)(colon - s) : n;
    u->user = userinfo_part(s, user_len);
    if (u->user && colon)
        u->password = userinfo_part(colon + 1, n - user_len - 1);
    if (!u->user || (colon && !u->password)) {
        *why = "invalid user name or password";
        return false;
    }
    return true;
}

/* authority = [userinfo "@"] host [":" port]; the target's userinfo is
 * accepted and ignored, a proxy's is its credentials. */
static bool parse_authority(const char *a, size_t n, struct url *u, const struct url_kind *kind,
                            const char **why)
{
    const char *at = NULL;
    for (size_t i = 0; i < n; i++)
        if (a[i] == '@')
            at = a + i;
    if (at) {
        if (kind->credentials && !parse_userinfo(a, (size_t)(at - a), u, why))
            return false;
        n -= (size_t)(at + 1 - a);
        a = at + 1;
    }
    const char *host = a, *port = NULL;
    size_t host_len;
    char *v6 = NULL;
    if (n > 0 && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (!close || !(v6 = ipv6_host(a + 1, (size_t)(close - a - 1)))) {
            *why = "invalid IPv6 address";
            return false;
        }
        host = a + 1;
        host_len = (size_t)(close - host);
        const char *after = close + 1;
        if (after < a + n) {
            if (*after != ':') {
                *why = "invalid host";
                free(v6);
                return false;
            }
            port = after + 1;
        }
    } else {
        const char *colon = memchr(a, ':', n);
        host_len = colon ? (size_t)(colon - a) : n;
        if (!valid_reg_name(host, host_len)) {
            *why = host_len ? "invalid host" : "missing host";
            return false;
        }
        if (colon)
            port = colon + 1;
    }
    if (port && !valid_port(port, (size_t)(a + n - port))) {
        *why = "invalid port";
        free(v6);
        return false;
    }
    u->host = v6 ? v6 : xstrndup(host, host_len);
    if (port)
        u->port = xstrndup(port, (size_t)(a + n - port));
    u->service = xstrdup(u->port              ? u->port
                         : kind->default_port ? kind->default_port
                         : u->tls             ? "443"
                                              : "80");
    return true;
}

static bool parse(const char *s, struct url *u, const struct url_kind *kind, const char **why)
{
    const char *rest;
    memset(u, 0, sizeof *u);
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            *why = "spaces or control characters in URL";
            goto fail;
        }
    if (!parse_scheme(s, u, kind, &rest, why))
        goto fail;
    size_t n = strcspn(rest, "/?#");
    if (!parse_authority(rest, n, u, kind, why))
        goto fail;
    /* A query with no path still needs the "/" before it. */
    size_t path_len = strcspn(rest + n, "#");
    if (rest[n] == '/')
        u->path = xstrndup(rest + n, path_len);
    else
        u->path = xasprintf("/%.*s", (int)path_len, rest + n);
    return true;
fail:
    url_free(u);
    return false;
}

bool url_parse(const char *s, struct url *u, const char **why) { return parse(s, u, &target, why); }

bool url_parse_proxy(const char *s, struct url *u, const char **why)
{
    if (!parse(s, u, &proxy, why))
        return false;
    if (strcmp(u->path, "/") != 0) {
        *why = "a proxy's URL has no path";
        url_free(u);
        return false;
    }
    return true;
}

void url_free(struct url *u)
{
    free(u->scheme);
    free(u->host);
    free(u->port);
    free(u->service);
    free(u->path);
    free(u->user);
    free(u->password);
    memset(u, 0, sizeof *u);
}

char *url_host_header(const struct url *u)
{
    bool v6 = strchr(u->host, ':') != NULL;
    /* An IPv6 zone names an interface of this machine: the server has no
     * use for it (RFC 6874 §4). */
    int host_len = (int)strcspn(u->host, v6 ? "%" : "");
    return xasprintf("%s%.*s%s%s%s", v6 ? "[" : "", host_len, u->host, v6 ? "]" : "",
                     u->port ? ":" : "", u->port ? u->port : "");
}
