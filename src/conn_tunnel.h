/* A connection's tunnel through a proxy (--proxy), between its TCP connect
 * and its transport's handshake.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_CONN_TUNNEL_H
#define VOLLEY_CONN_TUNNEL_H

struct conn;

/* A connection's struct conn_config tunnel through a proxy: connected to
 * it (c->tunnel begun), or its socket ready either way, the set-up goes
 * on; once the tunnel is up, the transport's handshake. */
void conn_tunnel_step(struct conn *c);

#endif
