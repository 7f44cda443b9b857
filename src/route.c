/* Opening a connection along the run's route: bound to its source address,
 * connected to the target or the proxy; and, for the checks before the
 * run, the same with the wait and the tunnel's set-up done in place.
 * SPDX-License-Identifier: MIT */
#include "route.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "sources.h"
#include "transport.h"
#include "tunnel.h"

size_t route_source(const struct route *r, uint64_t g)
{
    return r->sources ? (size_t)(g % r->sources->n) : 0;
}

void route_count(const struct route *r, struct sources_count *counts, uint64_t g, bool connected)
{
    if (!counts)
        return;
    if (connected)
        counts[route_source(r, g)].connects++;
    else
        counts[route_source(r, g)].errors++;
}

/* Binding failed: the address is not this machine's, or it has no port
 * left (of the range, of the window). */
static enum cause bind_cause(int err)
{
    return err == EADDRNOTAVAIL             ? CAUSE_BIND_ADDRESS
           : err == EADDRINUSE              ? CAUSE_NO_PORT
           : err == EMFILE || err == ENFILE ? CAUSE_FD_LIMIT
                                            : CAUSE_CONNECT_OTHER;
}

static enum cause errno_cause(const struct route *r, int err)
{
    switch (err) {
    case ECONNREFUSED:
    case ENOENT: /* a Unix socket path that is gone */
        return r->proxy ? CAUSE_PROXY_REFUSED : CAUSE_REFUSED;
    case ENETUNREACH:
    case EHOSTUNREACH:
        return CAUSE_UNREACHABLE;
    /* connect() found no local port free for another connection to the
     * target from the source address */
    case EADDRNOTAVAIL:
        return CAUSE_NO_PORT;
    case ETIMEDOUT:
        return CAUSE_CONNECT_TIMEOUT;
    case EMFILE:
    case ENFILE:
        return CAUSE_FD_LIMIT;
    default:
        return CAUSE_CONNECT_OTHER;
    }
}

enum cause route_connect_cause(const struct route *r, struct sources_ports *ports, uint64_t g,
                               int err)
{
    if (err == EADDRNOTAVAIL)
        sources_found_full(ports, route_source(r, g), clock_us());
    return errno_cause(r, err);
}

int route_open(const struct route *r, struct sources_ports *ports, uint64_t g, int type,
               bool *in_progress, enum cause *cause)
{
    size_t i = route_source(r, g);
    if (sources_full(ports, i, clock_us())) {
        *cause = CAUSE_NO_PORT;
        errno = EADDRINUSE;
        return -1;
    }
    int fd = net_socket(&r->addr, type);
    if (fd < 0) {
        *cause = errno_cause(r, errno);
        return -1;
    }
    if (r->ports_in_order && type == SOCK_STREAM)
        net_ports_in_order(fd);
    int err = r->sources ? sources_bind(r->sources, ports, i, fd) : 0;
    if (err) {
        close(fd);
        *cause = bind_cause(err);
        errno = err;
        return -1;
    }
    if (!net_start_connect(fd, &r->addr, in_progress)) {
        int e = errno;
        *cause = route_connect_cause(r, ports, g, e);
        errno = e;
        return -1;
    }
    return fd;
}

/* The tunnel's set-up, waited on in place. */
static bool dial_tunnel(const struct route *r, int fd, uint64_t deadline, char *why, size_t len)
{
    struct tunnel_conn tc;
    enum cause cause;
    int rc = tunnel_wait(r->tunnel, &tc, fd, deadline, &cause);
    if (rc == IO_ERROR)
        tunnel_failure(r->tunnel, &tc, cause, why, len);
    else if (rc != IO_OK)
        snprintf(why, len, "the proxy did not set up the tunnel in time");
    return rc == IO_OK;
}

int route_dial(const struct route *r, uint64_t deadline, char *why, size_t len)
{
    struct sources_ports ports;
    bool in_progress;
    enum cause cause;
    int err = 0;
    /* the whole range is this check's */
    sources_ports_init(&ports, r->sources, 0, 1, 1);
    int fd = route_open(r, &ports, 0, SOCK_STREAM, &in_progress, &cause);
    if (fd < 0)
        err = errno;
    sources_ports_free(&ports);
    if (fd >= 0 && in_progress)
        err = net_wait(fd, POLLOUT, deadline) ? net_connect_error(fd) : ETIMEDOUT;
    if (err) {
        if (fd >= 0)
            close(fd);
        if (r->proxy)
            snprintf(why, len, "proxy %s: %s", r->proxy, strerror(err));
        else
            snprintf(why, len, "%s", strerror(err));
        return -1;
    }
    if (r->tunnel && !dial_tunnel(r, fd, deadline, why, len)) {
        close(fd);
        return -1;
    }
    return fd;
}
