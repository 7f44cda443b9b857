/* The wrk module's functions written in C, which need nothing of a state
 * but their arguments: wrk.format, wrk.lookup and wrk.connect, and the
 * server addresses they and thread.addr hand out.
 * SPDX-License-Identifier: MIT */
#include "script_wrk.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "net.h"

#define ADDR_TYPE "volley.addr"
/* Where wrk.connect finds its timeout. */
#define TIMEOUT_KEY "volley.timeout_ms"

/* ------------------------------------------------------------------------ */
/* Server addresses: wrk.lookup, wrk.connect, thread.addr                     */
/* ------------------------------------------------------------------------ */

void script_push_addr(lua_State *L, const struct net_addr *a)
{
    struct net_addr *u = lua_newuserdata(L, sizeof *u);
    *u = *a;
    luaL_getmetatable(L, ADDR_TYPE);
    lua_setmetatable(L, -2);
}

struct net_addr *script_check_addr(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, ADDR_TYPE);
}

static int addr_tostring(lua_State *L)
{
    char *s = net_addr_str(script_check_addr(L, 1));
    lua_pushstring(L, s);
    free(s);
    return 1;
}

/* wrk.lookup(host, service): every address getaddrinfo returns. */
static int wrk_lookup(lua_State *L)
{
    const char *host = luaL_checkstring(L, 1), *service = luaL_optstring(L, 2, "http");
    const char *why;
    struct net_addr *addrs;
    size_t n;
    /* Not every system has /etc/services for the scheme names. */
    const char *port = strcasecmp(service, "http") == 0    ? "80"
                       : strcasecmp(service, "https") == 0 ? "443"
                                                           : service;
    if (!net_lookup(host, port, &addrs, &n, &why))
        return luaL_error(L, "unable to resolve %s:%s: %s", host, service, why);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        script_push_addr(L, &addrs[i]);
        lua_rawseti(L, -2, (int)i + 1);
    }
    free(addrs);
    return 1;
}

/* wrk.connect(addr): whether a connection to addr can be opened. */
static int wrk_connect(lua_State *L)
{
    struct net_addr *a = script_check_addr(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, TIMEOUT_KEY);
    int timeout_ms = (int)lua_tointeger(L, -1);
    lua_pushboolean(L, net_probe(a, timeout_ms > 0 ? timeout_ms : 2000) == 0);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* wrk.format                                                                 */
/* ------------------------------------------------------------------------ */

/* The first key of table t equal to name ignoring case, pushed; or nothing
 * pushed and false. */
static bool find_key(lua_State *L, int t, const char *name)
{
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING && strcasecmp(lua_tostring(L, -1), name) == 0)
            return true;
    }
    return false;
}

/* Remove every key equal to name ignoring case. */
static void remove_keys(lua_State *L, int t, const char *name)
{
    while (find_key(L, t, name)) {
        lua_pushnil(L);
        lua_rawset(L, t);
    }
}

/* Of the keys of table t equal to name ignoring case, keeps one and
 * removes the others; pushes the one kept (nil if there was none). One the
 * script spelled itself is kept rather than the spelling name has (the one
 * wrk.init adds): a "host" a script set in init() wins over the default. */
static void keep_one_key(lua_State *L, int t, const char *name)
{
    int kept = lua_gettop(L) + 1;
    lua_pushnil(L);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING && strcasecmp(lua_tostring(L, -1), name) == 0 &&
            (lua_isnil(L, kept) || strcmp(lua_tostring(L, kept), name) == 0)) {
            lua_pushvalue(L, -1);
            lua_replace(L, kept);
        }
    }
    /* Clearing fields during a traversal is allowed. */
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING && strcasecmp(lua_tostring(L, -1), name) == 0 &&
            !lua_rawequal(L, -1, kept)) {
            lua_pushvalue(L, -1);
            lua_pushnil(L);
            lua_rawset(L, t);
        }
    }
}

static bool name_is(const char *name, size_t len, const char *want, size_t want_len)
{
    return len == want_len && strncasecmp(name, want, len) == 0;
}

/* Appends "name: value\r\n" for every field of the table at index t,
 * counting the Host and Content-Length fields (in any case) among them. */
static void write_fields(lua_State *L, int t, struct buf *out, int *host, int *length)
{
    *host = *length = 0;
    lua_pushnil(L);
    while (lua_next(L, t)) {
        size_t name_len, value_len;
        lua_pushvalue(L, -2); /* converting the key itself would upset lua_next */
        const char *name = lua_tolstring(L, -1, &name_len);
        const char *value = lua_tolstring(L, -2, &value_len);
        if (!name || !value)
            luaL_error(L, "header names and values must be strings or numbers");
        *host += name_is(name, name_len, "Host", 4);
        *length += name_is(name, name_len, "Content-Length", 14);
        buf_append(out, name, name_len);
        buf_append(out, ": ", 2);
        buf_append(out, value, value_len);
        buf_append(out, "\r\n", 2);
        lua_pop(L, 2);
    }
}

/* wrk.format(method, path, headers, body) with wrk's side effects on the
 * headers table: Host is added from wrk.headers when missing, Content-Length
 * is set to the body's length, or removed when there is no body. Header
 * names match ignoring case, so "host" or "content-length" set by a script
 * are not sent twice, even beside "Host" or "Content-Length" in the same
 * table (one of them is kept). Written in C: dynamic scripts call it per request, and
 * the common call (a table with Host, no body) takes one pass over the
 * headers. The bytes are assembled in the state's scratch buffer (upvalue 1),
 * which an error cannot leak; upvalue 2 is the wrk module, as the upvalue
 * wrk's own Lua version reads its defaults from. */
static int wrk_format(lua_State *L)
{
    struct buf *out = lua_touserdata(L, lua_upvalueindex(1));
    static const char *const fields[] = {"method", "path", "headers", "body"};
    lua_settop(L, 4);
    lua_pushvalue(L, lua_upvalueindex(2)); /* 5 */
    for (int i = 0; i < 4; i++)
        if (lua_isnil(L, i + 1)) {
            lua_getfield(L, 5, fields[i]);
            lua_replace(L, i + 1);
        }
    size_t method_len, path_len, body_len = 0;
    const char *method = luaL_checklstring(L, 1, &method_len);
    const char *path = luaL_checklstring(L, 2, &path_len);
    luaL_checktype(L, 3, LUA_TTABLE);
    const char *body = lua_isnil(L, 4) ? NULL : luaL_checklstring(L, 4, &body_len);

    buf_clear(out);
    buf_append(out, method, method_len);
    buf_append(out, " ", 1);
    buf_append(out, path, path_len);
    buf_append(out, " HTTP/1.1\r\n", 11);
    size_t fields_at = out->len;
    int host, length;
    write_fields(L, 3, out, &host, &length);
    if (host != 1 || body || length) {
        if (host > 1) {
            keep_one_key(L, 3, "Host");
            lua_settop(L, 5);
        } else if (!host) {
            lua_getfield(L, 5, "headers");
            if (lua_istable(L, -1) && find_key(L, lua_gettop(L), "Host")) {
                lua_gettable(L, -2);
                lua_setfield(L, 3, "Host");
            }
            lua_settop(L, 5);
        }
        if (body) {
            keep_one_key(L, 3, "Content-Length");
            if (lua_isnil(L, -1)) {
                lua_pop(L, 1);
                lua_pushliteral(L, "Content-Length");
            }
            lua_pushinteger(L, (lua_Integer)body_len);
            lua_rawset(L, 3);
        } else {
            remove_keys(L, 3, "Content-Length");
        }
        out->len = fields_at;
        write_fields(L, 3, out, &host, &length);
    }
    buf_append(out, "\r\n", 2);
    if (body)
        buf_append(out, body, body_len);
    lua_pushlstring(L, out->data, out->len);
    return 1;
}

void script_wrk_install(lua_State *L, int module, struct buf *scratch, uint64_t timeout_ms)
{
    luaL_newmetatable(L, ADDR_TYPE);
    lua_pushcfunction(L, addr_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    lua_pushinteger(L, (lua_Integer)timeout_ms);
    lua_setfield(L, LUA_REGISTRYINDEX, TIMEOUT_KEY);
    lua_pushlightuserdata(L, scratch);
    lua_pushvalue(L, module);
    lua_pushcclosure(L, wrk_format, 2);
    lua_setfield(L, module, "format");
    lua_pushcfunction(L, wrk_lookup);
    lua_setfield(L, module, "lookup");
    lua_pushcfunction(L, wrk_connect);
    lua_setfield(L, module, "connect");
}
