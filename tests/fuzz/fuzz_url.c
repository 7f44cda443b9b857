/* Fuzz target for the URL parser (src/url.c). A URL it accepts must have
 * every part set sensibly, and the URL rebuilt from its scheme, its Host
 * header and its path must parse back to the same parts (but an IPv6 zone,
 * which the Host header leaves out); a URL it refuses must come with a
 * reason and leave nothing allocated.
 * SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "url.h"
#include "xalloc.h"

static bool same_or_null(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static void check_accepted(const struct url *u)
{
    FUZZ_CHECK(u->scheme && u->host && u->service && u->path);
    FUZZ_CHECK(u->host[0] != '\0' && u->path[0] == '/');
    FUZZ_CHECK(u->tls == (strcasecmp(u->scheme, "https") == 0));
    FUZZ_CHECK(u->tls || strcasecmp(u->scheme, "http") == 0);
    if (u->port) {
        char *end;
        unsigned long port = strtoul(u->port, &end, 10);
        FUZZ_CHECK(*end == '\0' && port >= 1 && port <= 65535);
        FUZZ_CHECK(strcmp(u->service, u->port) == 0);
    } else {
        FUZZ_CHECK(strcmp(u->service, u->tls ? "443" : "80") == 0);
    }
    for (const char *p = u->path; *p; p++)
        FUZZ_CHECK((unsigned char)*p > ' ' && *p != 0x7f);

    char *host = url_host_header(u);
    char *again = xasprintf("%s://%s%s", u->scheme, host, u->path);
    struct url v;
    const char *why = NULL;
    FUZZ_CHECK(url_parse(again, &v, &why));
    size_t host_len = strchr(u->host, ':') ? strcspn(u->host, "%") : strlen(u->host);
    FUZZ_CHECK(strcmp(u->scheme, v.scheme) == 0 && strlen(v.host) == host_len &&
               strncmp(u->host, v.host, host_len) == 0);
    FUZZ_CHECK(same_or_null(u->port, v.port) && strcmp(u->service, v.service) == 0);
    FUZZ_CHECK(strcmp(u->path, v.path) == 0 && u->tls == v.tls);
    url_free(&v);
    free(again);
    free(host);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    FUZZ_CHECK(s);
    memcpy(s, data, size);
    s[size] = '\0';
    struct url u, zero;
    const char *why = NULL;
    memset(&zero, 0, sizeof zero);
    if (url_parse(s, &u, &why)) {
        check_accepted(&u);
        url_free(&u);
    } else {
        FUZZ_CHECK(why && why[0]);
    }
    FUZZ_CHECK(memcmp(&u, &zero, sizeof u) == 0);
    free(s);
    return 0;
}
