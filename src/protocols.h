/* The protocols volley speaks, in its order of preference, and finding one
 * by its ALPN id or its name. Adding a protocol is a session behind the
 * operations table of proto.h, in a file of its own, and its line here.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_PROTOCOLS_H
#define VOLLEY_PROTOCOLS_H

#include <stddef.h>

#include "proto.h"
#include "stats.h"

#ifdef VOLLEY_HTTP3
#define PROTOCOLS_COUNT 3
#else
#define PROTOCOLS_COUNT 2
#endif
_Static_assert(PROTOCOLS_COUNT <= STATS_PROTOCOLS, "stats count connections per protocol");

/* Every protocol, in order of preference; a protocol's place here is its
 * index in per-protocol figures (stats' by_protocol). */
extern const struct proto_ops *const protocols_all[PROTOCOLS_COUNT];

/* protocols_all's index of p. */
size_t protocols_index(const struct proto_ops *p);
/* The protocol of ALPN id (len bytes), or NULL. */
const struct proto_ops *protocols_by_alpn(const char *id, size_t len);
/* The protocol named name ("HTTP/2"), or NULL. */
const struct proto_ops *protocols_by_name(const char *name);

#endif
