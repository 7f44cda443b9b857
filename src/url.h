/* The target URL: scheme, host, port and the request path exactly as typed,
 * and the Host header wrk derives from them; a proxy's URL.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_URL_H
#define VOLLEY_URL_H

#include <stdbool.h>

struct url {
    char *scheme;   /* as typed ("http", "HTTPS") */
    char *host;     /* IPv6 literals without brackets, a zone after '%' decoded */
    char *port;     /* as typed, or NULL when the URL has none */
    char *service;  /* port, or the scheme's default ("80", "443") */
    char *path;     /* path + query as typed (no fragment); "/" when empty */
    char *user;     /* userinfo before ':', percent-decoded, or NULL */
    char *password; /* userinfo after ':', percent-decoded, or NULL */
    bool tls;
};

/* Parses s into u. On failure returns false and sets *why to a short reason. */
bool url_parse(const char *s, struct url *u, const char **why);
/* A proxy's URL: http://, socks5:// or socks5h://, [user[:password]@],
 * host and port (1080 when none is given), no path. */
bool url_parse_proxy(const char *s, struct url *u, const char **why);
void url_free(struct url *u);

/* The default Host header: host (bracketed when it contains ':', without an
 * IPv6 zone), plus ":port" only when the URL named a port. Caller frees. */
char *url_host_header(const struct url *u);

#endif
