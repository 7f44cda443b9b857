/* URL parsing and the default Host header (wrk-spec §1.5, §1.6).
 * SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "unit.h"
#include "url.h"

static struct url u;

static bool parse(const char *s)
{
    const char *why;
    url_free(&u);
    return url_parse(s, &u, &why);
}

static const char *host_header(void)
{
    static char buf[256];
    char *h = url_host_header(&u);
    snprintf(buf, sizeof buf, "%s", h);
    free(h);
    return buf;
}

TEST(plain_http)
{
    CHECK(parse("http://127.0.0.1:8080/index.html"));
    CHECK_STR(u.scheme, "http");
    CHECK_STR(u.host, "127.0.0.1");
    CHECK_STR(u.port, "8080");
    CHECK_STR(u.service, "8080");
    CHECK_STR(u.path, "/index.html");
    CHECK(!u.tls);
    CHECK_STR(host_header(), "127.0.0.1:8080");
}

TEST(default_ports_and_host_header)
{
    CHECK(parse("http://example.com"));
    CHECK(u.port == NULL);
    CHECK_STR(u.service, "80");
    CHECK_STR(u.path, "/");
    CHECK_STR(host_header(), "example.com");
    CHECK(parse("https://example.com/x"));
    CHECK(u.tls);
    CHECK_STR(u.service, "443");
    CHECK(parse("http://example.com:80/"));
    CHECK_STR(host_header(), "example.com:80"); /* the port is kept when typed */
    CHECK(parse("HTTPS://h/"));
    CHECK(u.tls);
    CHECK_STR(u.scheme, "HTTPS");
}

TEST(path_and_query_as_typed_without_the_fragment)
{
    CHECK(parse("http://h:1/p?q=1#f"));
    CHECK_STR(u.path, "/p?q=1");
    CHECK(parse("http://h?x=1"));
    CHECK_STR(u.path, "/?x=1");
    CHECK(parse("http://h#frag"));
    CHECK_STR(u.path, "/");
    CHECK(parse("http://h/a%23b?c#d#e"));
    CHECK_STR(u.path, "/a%23b?c");
}

TEST(ipv6_literals)
{
    CHECK(parse("http://[::1]:8080/"));
    CHECK_STR(u.host, "::1");
    CHECK_STR(u.port, "8080");
    CHECK_STR(host_header(), "[::1]:8080");
    CHECK(parse("http://[2001:db8::5]/a"));
    CHECK_STR(u.host, "2001:db8::5");
    CHECK_STR(host_header(), "[2001:db8::5]");
}

TEST(ipv6_zones)
{
    /* RFC 6874's "%25", percent-encoded, or the raw form; never in Host */
    CHECK(parse("http://[fe80::1%25eth0]:8080/"));
    CHECK_STR(u.host, "fe80::1%eth0");
    CHECK_STR(host_header(), "[fe80::1]:8080");
    CHECK(parse("http://[fe80::1%eth0]/"));
    CHECK_STR(u.host, "fe80::1%eth0");
    CHECK_STR(host_header(), "[fe80::1]");
    CHECK(parse("http://[fe80::1%25en%2Dp0]/"));
    CHECK_STR(u.host, "fe80::1%en-p0");
    CHECK(!parse("http://[fe80::1%25]/"));
    CHECK(!parse("http://[fe80::1%]/"));
    CHECK(!parse("http://[zz%25eth0]/"));
    CHECK(!parse("http://[fe80::1%25a%00b]/"));
    CHECK(!parse("http://[fe80::1%25a%20b]/"));
}

TEST(userinfo_ignored)
{
    CHECK(parse("http://user:pw@h:81/x"));
    CHECK_STR(u.host, "h");
    CHECK_STR(u.port, "81");
}

TEST(invalid_urls)
{
    const char *bad[] = {"127.0.0.1:8080/", "/index.html",     "http:///",     "http://",
                         "http://h:/",      "http://h:99999/", "http://h:0/",  "http://h:8x/",
                         "ftp://h/",        "http://[::1/",    "http://[zz]/", "http://h h/",
                         "http://[::1]x/",  "://h/",           "http//h",      ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (parse(bad[i]))
            UNIT_FAIL("\"%s\" was accepted", bad[i]);
}
