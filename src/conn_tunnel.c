/* A connection's tunnel through a proxy: after the TCP connect to the
 * proxy, its CONNECT or SOCKS5 set-up (tunnel.c) stepped as the socket is
 * ready, then the transport's handshake (conn.c). On either engine the
 * set-up's few bytes go through the worker's loop (readiness, the
 * connection's watchers); on io_uring the ring takes the socket only once
 * the tunnel is up, for the target's bytes (tunnel.c reads none of
 * those). Setting the tunnel up is connect time, as the handshake is.
 * SPDX-License-Identifier: MIT */
#include "conn_tunnel.h"

#include "clock.h"
#include "conn.h"
#include "route.h"
#include "tunnel.h"

void conn_tunnel_step(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    struct ev_loop *loop = cfg->loop;
    enum cause cause;
    int rc = tunnel_step(cfg->route->tunnel, &c->tunnel, c->sock.fd, &cause);
    switch (rc) {
    case IO_OK: {
        uint64_t now = clock_us();
        cfg->stats->tunnels++;
        cfg->stats->tunnel_us += now - c->connected_at;
        c->connected_at = now;
        /* the handshake arms what it waits for (on io_uring, the ring) */
        ev_io_stop(loop, &c->rio);
        ev_io_stop(loop, &c->wio);
        conn_handshake(c);
        break;
    }
    case IO_WANT_READ:
    case IO_WANT_WRITE:
        conn_await(c, rc);
        break;
    default:
        if (cause == CAUSE_PROXY_STATUS)
            cfg->stats->proxy_status[c->tunnel.status < STATS_STATUS_MAX ? c->tunnel.status : 0]++;
        conn_connect_failed(c, cause);
        break;
    }
}
