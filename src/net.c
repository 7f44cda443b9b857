/* Socket plumbing: address lookup and the start-up probe wrk does, the
 * non-blocking connect each connection uses, and RLIMIT_NOFILE.
 * SPDX-License-Identifier: MIT */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "xalloc.h"

bool net_lookup(const char *host, const char *service, struct net_addr **addrs, size_t *n,
                const char **err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res, *ai;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        *err = rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc);
        return false;
    }
    size_t count = 0;
    for (ai = res; ai; ai = ai->ai_next)
        count++;
    *addrs = xcalloc(count, sizeof **addrs);
    *n = 0;
    for (ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(struct sockaddr_storage))
            continue;
        memcpy(&(*addrs)[*n].sa, ai->ai_addr, ai->ai_addrlen);
        (*addrs)[(*n)++].len = ai->ai_addrlen;
    }
    freeaddrinfo(res);
    return true;
}

static bool decimal_port(const char *s)
{
    unsigned long v = 0;
    if (!*s || strlen(s) > 5)
        return false;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9')
            return false;
        v = v * 10 + (unsigned long)(*c - '0');
    }
    return v >= 1 && v <= 65535;
}

bool net_parse_listen(const char *s, char **host, char **port, const char **why)
{
    const char *colon = strrchr(s, ':'), *h = s, *h_end;
    if (!colon) {
        *why = "expected HOST:PORT, [IPV6]:PORT or :PORT";
        return false;
    }
    h_end = colon;
    if (*s == '[') {
        h = s + 1;
        h_end = colon > s && colon[-1] == ']' ? colon - 1 : NULL;
        if (!h_end || h_end == h || memchr(h, ']', (size_t)(h_end - h))) {
            *why = "an IPv6 address goes in brackets: [::1]:9465";
            return false;
        }
    } else if (memchr(s, ':', (size_t)(colon - s))) {
        *why = "an IPv6 address goes in brackets: [::1]:9465";
        return false;
    }
    if (!decimal_port(colon + 1)) {
        *why = "the port must be a number from 1 to 65535";
        return false;
    }
    *host = h_end > h ? xstrndup(h, (size_t)(h_end - h)) : NULL;
    *port = xstrdup(colon + 1);
    return true;
}

int net_listen(const char *host, const char *port, const char **why)
{
    struct addrinfo hints = {.ai_family = host ? AF_UNSPEC : AF_INET6,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0 && !host) { /* no IPv6 here: every IPv4 interface */
        hints.ai_family = AF_INET;
        rc = getaddrinfo(host, port, &hints, &res);
    }
    if (rc != 0) {
        *why = rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc);
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        int one = 1, zero = 0;
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        /* A port left in TIME_WAIT by the last run is free to take again;
         * one another process listens on is not (no SO_REUSEPORT). */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (!host && ai->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        *why = strerror(err ? err : EADDRNOTAVAIL);
    return fd;
}

bool net_unix_addr(const char *path, struct net_addr *a)
{
    struct sockaddr_un *un = (struct sockaddr_un *)&a->sa;
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof un->sun_path)
        return false;
    memset(a, 0, sizeof *a);
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, path, len + 1);
    a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    return true;
}

int net_socket(const struct net_addr *a, int type)
{
    int family = a->sa.ss_family;
    int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (type == SOCK_STREAM && (family == AF_INET || family == AF_INET6)) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

void net_ports_in_order(int fd)
{
    /* The kernel's whole ephemeral range, searched in order at connect()
     * from where its last search for the 4-tuple ended. Without a range of
     * its own a socket gets the even ports first (the odd ones it keeps for
     * bind()): once the even half holds connections to the target (14k of
     * the default range), every connect scans all of it before it tries an
     * odd port, milliseconds each. A range set on the socket ends that split
     * (Linux 6.8; earlier kernels take the option and keep it, or refuse
     * it). */
    uint32_t whole = (uint32_t)UINT16_MAX << 16;
    setsockopt(fd, IPPROTO_IP, IP_LOCAL_PORT_RANGE, &whole, sizeof whole);
}

bool net_start_connect(int fd, const struct net_addr *a, bool *in_progress)
{
    *in_progress = false;
    if (connect(fd, (const struct sockaddr *)&a->sa, a->len) < 0) {
        /* A Unix socket whose backlog is full says EAGAIN: wait for it as for
         * a TCP connect in progress. */
        if (errno != EINPROGRESS && errno != EAGAIN) {
            int e = errno;
            close(fd);
            errno = e;
            return false;
        }
        *in_progress = true;
    }
    return true;
}

int net_connect(const struct net_addr *a, int type, bool *in_progress)
{
    int fd = net_socket(a, type);
    return fd >= 0 && net_start_connect(fd, a, in_progress) ? fd : -1;
}

int net_connect_error(int fd)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return errno;
    /* A Unix socket that found the backlog full is writable at once, with
     * no error and no peer: its connect failed as it began (EAGAIN). */
    struct sockaddr_storage peer;
    len = sizeof peer;
    if (!err && getpeername(fd, (struct sockaddr *)&peer, &len) < 0 && errno == ENOTCONN)
        return EAGAIN;
    return err;
}

int net_probe(const struct net_addr *a, int timeout_ms)
{
    bool in_progress;
    int fd = net_connect(a, SOCK_STREAM, &in_progress);
    if (fd < 0)
        return errno;
    int err = 0;
    if (in_progress) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int rc;
        while ((rc = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
            ;
        err = rc == 0 ? ETIMEDOUT : rc < 0 ? errno : net_connect_error(fd);
    }
    close(fd);
    return err;
}

bool net_wait(int fd, short events, uint64_t deadline)
{
    struct pollfd p = {.fd = fd, .events = events};
    int rc;
    do {
        uint64_t now = clock_us();
        if (now >= deadline)
            return false;
        rc = poll(&p, 1, (int)((deadline - now + 999) / 1000));
    } while (rc < 0 && errno == EINTR);
    return rc > 0;
}

char *net_addr_str(const struct net_addr *a)
{
    char host[INET6_ADDRSTRLEN];
    const struct sockaddr *sa = (const struct sockaddr *)&a->sa;
    switch (sa->sa_family) {
    case AF_INET: {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        return xasprintf("%s:%u", host, ntohs(in->sin_port));
    }
    case AF_INET6: {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        return xasprintf("%s:%u", host, ntohs(in6->sin6_port));
    }
    case AF_UNIX:
        return xstrdup(((const struct sockaddr_un *)sa)->sun_path);
    default:
        return xstrdup("?");
    }
}

uint64_t net_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl = want;
    }
    return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}
