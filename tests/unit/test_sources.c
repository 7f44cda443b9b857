/* --bind's addresses and ranges, --bind-port-range, each worker's window
 * of the range when volley binds the ports itself, and an address found
 * without a free port left alone for a while.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sources.h"
#include "unit.h"

static struct sources s;
static char why[128];

static bool parse(const char *list)
{
    sources_free(&s);
    return sources_parse(&s, list, why, sizeof why);
}

/* The addresses parsed, joined by spaces. */
static const char *listed(void)
{
    static char out[1024];
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < s.n && n < sizeof out - 64; i++) {
        char a[64];
        sources_addr_text(&s.addrs[i], a, sizeof a);
        n += (size_t)snprintf(out + n, sizeof out - n, "%s%s", i ? " " : "", a);
    }
    return out;
}

TEST(lists_and_ranges)
{
    CHECK(parse("127.0.0.2,127.0.0.3,::1"));
    CHECK_STR(listed(), "127.0.0.2 127.0.0.3 ::1");
    /* a /29 without its network's and broadcast address; host bits of
     * the address given are masked */
    CHECK(parse("10.1.2.5/29"));
    CHECK_STR(listed(), "10.1.2.1 10.1.2.2 10.1.2.3 10.1.2.4 10.1.2.5 10.1.2.6");
    CHECK(parse("10.1.2.4/31,10.9.9.9/32"));
    CHECK_STR(listed(), "10.1.2.4 10.1.2.5 10.9.9.9");
    /* IPv6 ranges are all host addresses, across a byte */
    CHECK(parse("2001:db8::fe/126"));
    CHECK_STR(listed(), "2001:db8::fc 2001:db8::fd 2001:db8::fe 2001:db8::ff");
    CHECK(parse("2001:db8::/120"));
    CHECK_U64(s.n, 256);
    CHECK(parse("10.0.0.0/16"));
    CHECK_U64(s.n, 65534);
}

TEST(what_is_no_list)
{
    CHECK(!parse(""));
    CHECK_STR(why, "no address");
    CHECK(!parse("127.0.0.2,web"));
    CHECK_STR(why, "'web' is not an IP address");
    CHECK(!parse("10.0.0.0/15"));
    CHECK_STR(why, "10.0.0.0/15 has more than 65536 addresses");
    CHECK(!parse("2001:db8::/64"));
    CHECK(!parse("10.0.0.0/"));
    CHECK_STR(why, "'10.0.0.0/' is not an address range (ADDRESS/PREFIX)");
    CHECK(!parse("10.0.0.0/8x"));
    CHECK(!parse("10.0.0/24"));
    CHECK(!parse("::1/129"));
    /* past 65536 addresses in all */
    CHECK(!parse("10.0.0.0/16,10.1.0.0/16"));
    CHECK_STR(why, "more than 65536 addresses");
}

TEST(port_ranges)
{
    struct sources p = {0};
    CHECK(sources_parse_ports(&p, "40000-40039"));
    CHECK_U64(p.lo, 40000);
    CHECK_U64(p.hi, 40039);
    CHECK(sources_parse_ports(&p, "1-65535"));
    CHECK(sources_parse_ports(&p, "9-9"));
    const char *bad[] = {"",    "10",  "0-10",   "10-9",   "10-65536", "-5",
                         "a-b", "10-", "10-20x", "+10-20", "10--20"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (sources_parse_ports(&p, bad[i]))
            UNIT_FAIL("took '%s'", bad[i]);
}

TEST(each_worker_has_its_own_window_of_the_range)
{
    struct sources p = {.lo = 1000, .hi = 1099, .own_ports = true, .n = 1};
    struct sources_ports w[3];
    /* 10 connections of the run: workers of 4, 3 and 3 */
    sources_ports_init(&w[0], &p, 0, 4, 10);
    sources_ports_init(&w[1], &p, 4, 3, 10);
    sources_ports_init(&w[2], &p, 7, 3, 10);
    CHECK_U64(w[0].from, 1000);
    CHECK_U64(w[0].to, 1039);
    CHECK_U64(w[1].from, 1040);
    CHECK_U64(w[1].to, 1069);
    CHECK_U64(w[2].from, 1070);
    CHECK_U64(w[2].to, 1099);
    for (int i = 0; i < 3; i++)
        sources_ports_free(&w[i]);
    /* more connections than ports: a window of one at least */
    sources_ports_init(&w[0], &p, 5, 1, 1000);
    CHECK_U64(w[0].from, 1000);
    CHECK_U64(w[0].to, 1000);
    sources_ports_free(&w[0]);
}

TEST(an_address_without_a_free_port_is_not_searched_again_for_100_ms)
{
    /* volley's own ports: a window of one, which a socket holds */
    CHECK(parse("127.0.0.1,127.0.0.2"));
    s.lo = s.hi = 0;
    int holder = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    CHECK(bind(holder, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(getsockname(holder, (struct sockaddr *)&a, &len) == 0);
    s.lo = s.hi = ntohs(a.sin_port);
    s.own_ports = true;
    struct sources_ports w;
    sources_ports_init(&w, &s, 0, 1, 1);
    CHECK(!sources_full(&w, 0, 1));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_U64(sources_bind(&s, &w, 0, fd), EADDRINUSE);
    close(fd);
    /* found full now: for the next 100 ms, without a search */
    CHECK(w.full_at[0] > 0);
    CHECK(sources_full(&w, 0, w.full_at[0]));
    CHECK(sources_full(&w, 0, w.full_at[0] + 99999));
    CHECK(!sources_full(&w, 0, w.full_at[0] + 100000));
    CHECK(!sources_full(&w, 1, w.full_at[0]));
    /* the kernel's search at connect() says so the same way */
    sources_found_full(&w, 1, 5000000);
    CHECK(sources_full(&w, 1, 5050000));
    CHECK(!sources_full(&w, 1, 5100000));
    /* found full again as soon as it was searched: twice as long, up to 2 s */
    sources_found_full(&w, 1, 5100000);
    CHECK(sources_full(&w, 1, 5299999));
    CHECK(!sources_full(&w, 1, 5300000));
    uint64_t at = 5300000;
    for (int k = 0; k < 10; k++) {
        sources_found_full(&w, 1, at);
        at += w.full_wait[1];
    }
    CHECK_U64(w.full_wait[1], 2000000);
    /* searched again long after: 100 ms again */
    sources_found_full(&w, 1, at + 10000000);
    CHECK_U64(w.full_wait[1], 100000);
    sources_ports_free(&w);
    close(holder);
}
