/* What QUIC checks before a run: one blocking handshake to the target,
 * which also measures the round trip the run's handshakes start from.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_QUIC_START_H
#define VOLLEY_QUIC_START_H

#include <stdbool.h>
#include <stddef.h>

struct net_addr;

/* One blocking handshake to addr, at start-up: true when it completed (the
 * server speaks QUIC and HTTP/3, its certificate verifies under --verify);
 * else false, with why it failed in why ("no answer in 2s", "TLS alert
 * 40 (handshake_failure)"). */
bool quic_probe(const struct net_addr *addr, int timeout_ms, char *why, size_t why_len);

#endif
