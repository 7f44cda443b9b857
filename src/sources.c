/* Source addresses and ports. Without a port range each socket is bound to
 * its address with IP_BIND_ADDRESS_NO_PORT, so that the kernel picks the
 * port at connect(), unique per 4-tuple: each address has its own ports to
 * the target. A range inside the kernel's ephemeral range narrows that
 * choice with IP_LOCAL_PORT_RANGE (Linux 6.3); one outside it, or on older
 * kernels, is walked here, a port at a time.
 * SPDX-License-Identifier: MIT */
#include "sources.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "xalloc.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

/* With ports of its own, a connection tries this many of its window before
 * it counts no free port: a window nearly full of established connections
 * must not cost thousands of bind() calls per attempt. */
#define OWN_PORT_TRIES 1024

/* An address whose last search found no free port is not searched again
 * for this long: the connections that try it in between (each retries, up
 * to once a second) fail at once. A search costs the kernel a scan of its
 * whole range (13 ms for 64k ports in use), or OWN_PORT_TRIES bind() calls
 * here: tens of thousands of them a second would leave the thread no time
 * for the run, nor for its end. Found full again as soon as it is searched,
 * the address waits twice as long, up to FULL_RETRY_MAX_US: ten searches a
 * second in each of sixteen threads (shards of a run on two cores) were
 * still all the CPU there was, and the connects under way waited for it
 * past their timeout. */
#define FULL_RETRY_US 100000
#define FULL_RETRY_MAX_US 2000000

/* ------------------------------------------------------------------------ */
/* The list                                                                   */
/* ------------------------------------------------------------------------ */

static bool add(struct sources *s, const struct net_addr *a)
{
    if (s->n == SOURCES_MAX)
        return false;
    /* doubling: a /16 is 65,536 of them */
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->addrs = xrealloc(s->addrs, s->cap * sizeof *s->addrs);
    }
    s->addrs[s->n++] = *a;
    return true;
}

/* One address, IPv6 with a zone too ("fe80::1%eth0"). */
static bool address(const char *text, struct net_addr *a)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(text, "0", &hints, &res) != 0)
        return false;
    memset(a, 0, sizeof *a);
    memcpy(&a->sa, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

/* The address of a range, i addresses past the network's: its low bits
 * (never more than 16 of them, as a list is at most a /16) set to i. */
static void nth(struct net_addr *a, const unsigned char *net, size_t bytes, uint32_t i)
{
    unsigned char *out = a->sa.ss_family == AF_INET
                             ? (unsigned char *)&((struct sockaddr_in *)&a->sa)->sin_addr
                             : (unsigned char *)&((struct sockaddr_in6 *)&a->sa)->sin6_addr;
    memcpy(out, net, bytes);
    uint32_t carry = i;
    for (size_t k = bytes; k-- > 0 && carry;) {
        carry += out[k];
        out[k] = (unsigned char)carry;
        carry >>= 8;
    }
}

/* "ADDR/PREFIX": every address of the range (its network's, masked). */
static bool range(struct sources *s, const char *text, const char *slash, char *why, size_t len)
{
    char addr[INET6_ADDRSTRLEN];
    unsigned char net[16];
    struct net_addr a = {0};
    size_t n = (size_t)(slash - text);
    char *end;
    long prefix = strtol(slash + 1, &end, 10);
    bool v6 = memchr(text, ':', n) != NULL;
    size_t bytes = v6 ? 16 : 4, bits = bytes * 8;
    if (n >= sizeof addr || *end || end == slash + 1 || prefix < 0 || (size_t)prefix > bits) {
        snprintf(why, len, "'%s' is not an address range (ADDRESS/PREFIX)", text);
        return false;
    }
    memcpy(addr, text, n);
    addr[n] = '\0';
    if (inet_pton(v6 ? AF_INET6 : AF_INET, addr, net) != 1) {
        snprintf(why, len, "'%s' is not an address range (ADDRESS/PREFIX)", text);
        return false;
    }
    size_t host = bits - (size_t)prefix;
    if (host > 16) {
        snprintf(why, len, "%s has more than %d addresses", text, SOURCES_MAX);
        return false;
    }
    for (size_t b = (size_t)prefix; b < bits; b++) /* the network: host bits cleared */
        net[b / 8] &= (unsigned char)~(0x80u >> (b % 8));
    uint32_t count = 1u << host, first = 0;
    /* IPv4: a network's first address and its last (broadcast) are no
     * host's, but in a /31 or a /32 (RFC 3021). */
    if (!v6 && host >= 2) {
        first = 1;
        count -= 1;
    }
    a.sa.ss_family = v6 ? AF_INET6 : AF_INET;
    a.len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    for (uint32_t i = first; i < count; i++) {
        nth(&a, net, bytes, i);
        if (!add(s, &a)) {
            snprintf(why, len, "more than %d addresses", SOURCES_MAX);
            return false;
        }
    }
    return true;
}

bool sources_parse(struct sources *s, const char *list, char *why, size_t len)
{
    char *copy = xstrdup(list), *save = NULL;
    bool ok = *list != '\0';
    s->listed = true;
    if (!ok)
        snprintf(why, len, "no address");
    for (char *item = strtok_r(copy, ",", &save); ok && item; item = strtok_r(NULL, ",", &save)) {
        const char *slash = strchr(item, '/');
        struct net_addr a;
        if (slash) {
            ok = range(s, item, slash, why, len);
        } else if (!address(item, &a)) {
            snprintf(why, len, "'%s' is not an IP address", item);
            ok = false;
        } else if (!add(s, &a)) {
            snprintf(why, len, "more than %d addresses", SOURCES_MAX);
            ok = false;
        }
    }
    free(copy);
    return ok;
}

bool sources_parse_ports(struct sources *s, const char *arg)
{
    char *end;
    unsigned long lo = strtoul(arg, &end, 10), hi;
    if (end == arg || *end != '-' || arg[0] < '0' || arg[0] > '9')
        return false;
    const char *second = end + 1;
    hi = strtoul(second, &end, 10);
    if (end == second || *end || second[0] < '0' || second[0] > '9' || lo < 1 || lo > hi ||
        hi > 65535)
        return false;
    s->lo = (uint16_t)lo;
    s->hi = (uint16_t)hi;
    return true;
}

void sources_free(struct sources *s)
{
    free(s->addrs);
    memset(s, 0, sizeof *s);
}

void sources_addr_text(const struct net_addr *a, char *buf, size_t len)
{
    if (getnameinfo((const struct sockaddr *)&a->sa, a->len, buf, (socklen_t)len, NULL, 0,
                    NI_NUMERICHOST) != 0)
        snprintf(buf, len, "?");
}

/* ------------------------------------------------------------------------ */
/* Before the run                                                             */
/* ------------------------------------------------------------------------ */

static const char *family_name(int family) { return family == AF_INET6 ? "IPv6" : "IPv4"; }

/* Each address is this machine's: a socket binds to it (without taking a
 * port). */
static void check_local(const struct sources *s)
{
    char text[INET6_ADDRSTRLEN + 16];
    for (size_t i = 0; i < s->n; i++) {
        const struct net_addr *a = &s->addrs[i];
        int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        if (fd < 0)
            die("--bind: cannot open a socket: %s", strerror(errno));
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        int err = bind(fd, (const struct sockaddr *)&a->sa, a->len) < 0 ? errno : 0;
        close(fd);
        sources_addr_text(a, text, sizeof text);
        if (err == EADDRNOTAVAIL)
            die("--bind %s: %s (add the address to one of this machine's interfaces)", text,
                strerror(err));
        if (err)
            die("--bind %s: %s", text, strerror(err));
    }
}

/* The kernel's ephemeral ports (net.ipv4.ip_local_port_range, which IPv6
 * uses too). */
static bool ephemeral_range(unsigned *lo, unsigned *hi)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    bool ok = f && fscanf(f, "%u %u", lo, hi) == 2;
    if (f)
        fclose(f);
    return ok;
}

/* Whether the kernel narrows its choice of port to the range itself: only
 * inside its ephemeral range (IP_LOCAL_PORT_RANGE narrows it, never widens
 * it), and only since Linux 6.3. */
static bool kernel_picks(const struct sources *s, int family)
{
    unsigned lo, hi;
    uint32_t lo_hi = (uint32_t)s->lo | (uint32_t)s->hi << 16;
    if (!ephemeral_range(&lo, &hi) || s->lo < lo || s->hi > hi)
        return false;
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = fd >= 0 && setsockopt(fd, IPPROTO_IP, IP_LOCAL_PORT_RANGE, &lo_hi, sizeof lo_hi) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

bool sources_crowded(const struct sources *s, uint64_t connections)
{
    unsigned lo, hi;
    uint64_t addresses = s && s->listed ? s->n : 1;
    return ephemeral_range(&lo, &hi) && hi >= lo &&
           connections / addresses > ((uint64_t)hi - lo + 1) / 2;
}

void sources_ready(struct sources *s, int family)
{
    char text[INET6_ADDRSTRLEN + 16];
    if (!s->listed) {
        struct net_addr any = {.len = family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                         : sizeof(struct sockaddr_in)};
        any.sa.ss_family = (sa_family_t)family;
        add(s, &any);
    }
    for (size_t i = 0; i < s->n; i++) {
        if (s->addrs[i].sa.ss_family == family)
            continue;
        sources_addr_text(&s->addrs[i], text, sizeof text);
        die("--bind %s: an %s address, and the connections go to an %s one", text,
            family_name(s->addrs[i].sa.ss_family), family_name(family));
    }
    if (s->listed)
        check_local(s);
    s->own_ports = s->lo && !kernel_picks(s, family);
}

/* ------------------------------------------------------------------------ */
/* During the run                                                             */
/* ------------------------------------------------------------------------ */

void sources_ports_init(struct sources_ports *p, const struct sources *s, uint64_t first,
                        uint64_t n, uint64_t total)
{
    /* without --bind, the one address the kernel picks */
    size_t addresses = s ? s->n : 1;
    memset(p, 0, sizeof *p);
    p->full_at = xcalloc(addresses, sizeof *p->full_at);
    p->full_wait = xcalloc(addresses, sizeof *p->full_wait);
    if (!s || !s->own_ports)
        return;
    /* The window is this worker's share of the range, by its connections'
     * place among the whole run's: what it needs of each address's ports,
     * when the range holds as many as the run does. */
    uint64_t span = (uint64_t)(s->hi - s->lo) + 1;
    p->from = (uint16_t)(s->lo + first * span / total);
    uint64_t to = s->lo + (first + n) * span / total;
    p->to = to > p->from ? (uint16_t)(to - 1) : p->from;
    p->next = xmalloc(s->n * sizeof *p->next);
    p->reuse = xcalloc(s->n, sizeof *p->reuse);
    for (size_t i = 0; i < s->n; i++)
        p->next[i] = p->from;
}

void sources_ports_free(struct sources_ports *p)
{
    free(p->next);
    free(p->reuse);
    free(p->full_at);
    free(p->full_wait);
    memset(p, 0, sizeof *p);
}

static void set_port(struct net_addr *a, uint16_t port)
{
    if (a->sa.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&a->sa)->sin6_port = htons(port);
    else
        ((struct sockaddr_in *)&a->sa)->sin_port = htons(port);
}

/* The window's next port, from where the last one was taken. */
static uint16_t next_port(struct sources_ports *p, size_t i)
{
    uint16_t port = p->next[i];
    p->next[i] = port == p->to ? p->from : (uint16_t)(port + 1);
    return port;
}

/* Whether fd is a TCP socket, whose closes leave TIME_WAIT behind: a UDP
 * one (HTTP/3) leaves none, and SO_REUSEADDR would let two of them bind
 * the same port and take each other's datagrams. */
static bool stream(int fd)
{
    int type = 0;
    socklen_t len = sizeof type;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

/* A port of the window for the socket fd of address i. First one no
 * socket holds (bound without SO_REUSEADDR, which fails on any socket of
 * that address and port, live or in TIME_WAIT); then, over TCP,
 * SO_REUSEADDR is set, so that the TIME_WAIT its close may leave (a minute
 * of it) does not keep later sockets of this run, or of the next, off the
 * port. When none is free of sockets (a run again within the minute, or a
 * range the run has cycled through), the address's next ports are bound
 * with SO_REUSEADDR: past TIME_WAIT, and past this run's own connections,
 * where connect() then finds the 4-tuple taken (EADDRNOTAVAIL, the address
 * full for a while: sources_found_full, which brings the search back). */
static int bind_own_port(const struct sources *s, struct sources_ports *p, size_t i, int fd)
{
    struct net_addr a = s->addrs[i];
    size_t span = (size_t)(p->to - p->from) + 1;
    bool tcp = stream(fd);
    int one = 1;
    for (size_t tries = 0; !p->reuse[i] && tries < span && tries < OWN_PORT_TRIES; tries++) {
        set_port(&a, next_port(p, i));
        if (bind(fd, (const struct sockaddr *)&a.sa, a.len) == 0) {
            if (tcp)
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            return 0;
        }
        if (errno != EADDRINUSE)
            return errno;
    }
    if (tcp) {
        p->reuse[i] = true;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        set_port(&a, next_port(p, i));
        if (bind(fd, (const struct sockaddr *)&a.sa, a.len) == 0)
            return 0;
        if (errno != EADDRINUSE)
            return errno;
    }
    sources_found_full(p, i, clock_us());
    return EADDRINUSE;
}

bool sources_full(const struct sources_ports *p, size_t i, uint64_t now)
{
    return p->full_at[i] && now - p->full_at[i] < p->full_wait[i];
}

void sources_found_full(struct sources_ports *p, size_t i, uint64_t now)
{
    bool again = p->full_at[i] && now - p->full_at[i] < 2 * (uint64_t)p->full_wait[i];
    p->full_wait[i] = !again                                    ? FULL_RETRY_US
                      : 2 * p->full_wait[i] > FULL_RETRY_MAX_US ? FULL_RETRY_MAX_US
                                                                : 2 * p->full_wait[i];
    p->full_at[i] = now;
    if (p->reuse)
        p->reuse[i] = false; /* the next search looks for a port free of sockets first */
}

int sources_bind(const struct sources *s, struct sources_ports *p, size_t i, int fd)
{
    int one = 1;
    if (s->own_ports)
        return bind_own_port(s, p, i, fd);
    if (s->lo) {
        uint32_t lo_hi = (uint32_t)s->lo | (uint32_t)s->hi << 16;
        setsockopt(fd, IPPROTO_IP, IP_LOCAL_PORT_RANGE, &lo_hi, sizeof lo_hi);
    }
    if (!s->listed)
        return 0;
    /* The port is chosen at connect(), for the 4-tuple: bound now, it would
     * be one of the address's 64k whatever the target. */
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    const struct net_addr *a = &s->addrs[i];
    return bind(fd, (const struct sockaddr *)&a->sa, a->len) < 0 ? errno : 0;
}
