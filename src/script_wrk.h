/* The wrk module's functions written in C: wrk.format, wrk.lookup and
 * wrk.connect, and the server address type they and thread.addr use.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SCRIPT_WRK_H
#define VOLLEY_SCRIPT_WRK_H

#include <lua.h>
#include <stdint.h>

struct buf;
struct net_addr;

/* Sets format, lookup and connect on the module table at stack index
 * module, and the address type in the registry. wrk.format assembles its
 * bytes in scratch (the state's, freed with it); wrk.connect waits at most
 * timeout_ms (2 s when 0). */
void script_wrk_install(lua_State *L, int module, struct buf *scratch, uint64_t timeout_ms);

/* Pushes a server address userdata holding a copy of *a. */
void script_push_addr(lua_State *L, const struct net_addr *a);
/* The server address at idx, or a Lua error naming the argument. */
struct net_addr *script_check_addr(lua_State *L, int idx);

#endif
