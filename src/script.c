/* The Lua bridge. Every state gets the standard libraries, the wrk module
 * (src/wrk.lua, embedded at build time) with wrk.format, wrk.lookup and
 * wrk.connect written in C, and the userdata types a script meets: server
 * addresses, threads and statistics. Hooks run under lua_pcall with a
 * traceback handler; an error in any of them ends volley with the message.
 * Hook references are looked up once, after init(), and kept in the
 * registry, so the per-request cost is one call and no lookups.
 * SPDX-License-Identifier: MIT */
#include "script.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "cli.h"
#include "hist.h"
#include "http.h"
#include "net.h"
#include "proto.h"
#include "report.h"
#include "request.h"
#include "worker.h"
#include "wrk_lua.h"
#include "xalloc.h"

#define ADDR_TYPE "volley.addr"
#define THREAD_TYPE "volley.thread"
#define STATS_TYPE "volley.stats"
/* Stack slot of the error handler, pushed first in every state. */
#define HANDLER 1
/* thread:get/set copy tables this deep at most. */
#define COPY_DEPTH 64

struct script {
    lua_State *L;
    const struct config *cfg;
    struct worker *worker; /* NULL for the main state */
    int request_ref, response_ref, delay_ref;
    bool response_head, response_body;
    struct buf scratch; /* wrk.format's output */
};

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t fatal_lock = PTHREAD_MUTEX_INITIALIZER;

/* The error message on top of L ends volley. Worker threads may fail at the
 * same moment: the first one reports, the others wait for the exit. */
static void fatal(lua_State *L) __attribute__((noreturn));
static void fatal(lua_State *L)
{
    pthread_mutex_lock(&fatal_lock);
    const char *msg = lua_tostring(L, -1);
    fflush(stdout);
    fprintf(stderr, "volley: %s\n", msg ? msg : "(error object is not a string)");
    exit(1);
}

/* The message handler: the error plus a traceback of where it happened. */
static int on_error(lua_State *L)
{
    if (!lua_isstring(L, 1))
        lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    else
        lua_pushvalue(L, 1);
    lua_getglobal(L, "debug");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "traceback");
        if (lua_isfunction(L, -1)) {
            lua_pushvalue(L, -3);
            lua_pushinteger(L, 2);
            lua_call(L, 2, 1);
            return 1;
        }
    }
    lua_settop(L, 2);
    return 1;
}

static void call(struct script *s, int nargs, int nresults)
{
    if (lua_pcall(s->L, nargs, nresults, HANDLER) != 0)
        fatal(s->L);
}

/* ------------------------------------------------------------------------ */
/* Server addresses: wrk.lookup, wrk.connect, thread.addr                     */
/* ------------------------------------------------------------------------ */

static void push_addr(lua_State *L, const struct net_addr *a)
{
    struct net_addr *u = lua_newuserdata(L, sizeof *u);
    *u = *a;
    luaL_getmetatable(L, ADDR_TYPE);
    lua_setmetatable(L, -2);
}

static int addr_tostring(lua_State *L)
{
    char *s = net_addr_str(luaL_checkudata(L, 1, ADDR_TYPE));
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
        push_addr(L, &addrs[i]);
        lua_rawseti(L, -2, (int)i + 1);
    }
    free(addrs);
    return 1;
}

/* wrk.connect(addr): whether a connection to addr can be opened. */
static int wrk_connect(lua_State *L)
{
    struct net_addr *a = luaL_checkudata(L, 1, ADDR_TYPE);
    lua_getfield(L, LUA_REGISTRYINDEX, "volley.timeout_ms");
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

static bool name_is(const char *name, size_t len, const char *want, size_t want_len)
{
    return len == want_len && strncasecmp(name, want, len) == 0;
}

/* Appends "name: value\r\n" for every field of the table at index t, noting
 * whether Host and Content-Length (in any case) are among the names. */
static void write_fields(lua_State *L, int t, struct buf *out, bool *host, bool *length)
{
    *host = *length = false;
    lua_pushnil(L);
    while (lua_next(L, t)) {
        size_t name_len, value_len;
        lua_pushvalue(L, -2); /* converting the key itself would upset lua_next */
        const char *name = lua_tolstring(L, -1, &name_len);
        const char *value = lua_tolstring(L, -2, &value_len);
        if (!name || !value)
            luaL_error(L, "header names and values must be strings or numbers");
        *host = *host || name_is(name, name_len, "Host", 4);
        *length = *length || name_is(name, name_len, "Content-Length", 14);
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
 * are not sent twice. Written in C: dynamic scripts call it per request, and
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
    bool host, length;
    write_fields(L, 3, out, &host, &length);
    if (!host || body || length) {
        if (!host) {
            lua_getfield(L, 5, "headers");
            if (lua_istable(L, -1) && find_key(L, lua_gettop(L), "Host")) {
                lua_gettable(L, -2);
                lua_setfield(L, 3, "Host");
            }
            lua_settop(L, 5);
        }
        if (body) {
            if (!find_key(L, 3, "Content-Length"))
                lua_pushliteral(L, "Content-Length");
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

/* ------------------------------------------------------------------------ */
/* Copying values between states: thread:get and thread:set                  */
/* ------------------------------------------------------------------------ */

/* Copies the value at index idx of from onto the top of to. Tables are
 * copied deeply; seen (an index in from) is a table of the tables being
 * copied, to refuse cycles. Returns NULL or what could not be copied. */
static const char *copy_value(lua_State *from, int idx, lua_State *to, int seen, int depth)
{
    switch (lua_type(from, idx)) {
    case LUA_TNIL:
        lua_pushnil(to);
        return NULL;
    case LUA_TBOOLEAN:
        lua_pushboolean(to, lua_toboolean(from, idx));
        return NULL;
    case LUA_TNUMBER:
        lua_pushnumber(to, lua_tonumber(from, idx));
        return NULL;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(from, idx, &len);
        lua_pushlstring(to, s, len);
        return NULL;
    }
    case LUA_TTABLE:
        break;
    case LUA_TFUNCTION:
        return "a function";
    case LUA_TTHREAD:
        return "a coroutine";
    default:
        return "a userdata";
    }
    if (depth >= COPY_DEPTH)
        return "a table nested too deeply";
    lua_pushvalue(from, idx);
    lua_rawget(from, seen);
    bool cycle = lua_toboolean(from, -1);
    lua_pop(from, 1);
    if (cycle)
        return "a table that contains itself";
    if (!lua_checkstack(from, 4) || !lua_checkstack(to, 4))
        return "a table nested too deeply";
    lua_pushvalue(from, idx);
    lua_pushboolean(from, 1);
    lua_rawset(from, seen);
    lua_newtable(to);
    lua_pushnil(from);
    while (lua_next(from, idx)) {
        int top = lua_gettop(from);
        const char *err = copy_value(from, top - 1, to, seen, depth + 1);
        if (!err)
            err = copy_value(from, top, to, seen, depth + 1);
        if (err)
            return err;
        lua_rawset(to, -3);
        lua_pop(from, 1);
    }
    lua_pushvalue(from, idx);
    lua_pushnil(from);
    lua_rawset(from, seen);
    return NULL;
}

/* Pushes onto to a copy of from's value at idx, or raises an error in
 * caller (one of the two states) saying what cannot be copied: "to" or
 * "from" the thread, as the caller sees it. */
static void transfer(lua_State *caller, lua_State *from, int idx, lua_State *to,
                     const char *direction)
{
    if (from == to) {
        lua_pushvalue(to, idx);
        return;
    }
    int from_top = lua_gettop(from), to_top = lua_gettop(to);
    idx = idx < 0 ? from_top + idx + 1 : idx;
    lua_newtable(from);
    const char *err = copy_value(from, idx, to, lua_gettop(from), 0);
    if (err) {
        lua_settop(from, from_top);
        lua_settop(to, to_top);
        luaL_error(caller, "cannot copy %s %s a thread", err, direction);
    }
    lua_settop(from, from_top);
}

/* ------------------------------------------------------------------------ */
/* Thread userdata                                                            */
/* ------------------------------------------------------------------------ */

static void push_thread(lua_State *L, struct worker *w)
{
    struct worker **u = lua_newuserdata(L, sizeof *u);
    *u = w;
    luaL_getmetatable(L, THREAD_TYPE);
    lua_setmetatable(L, -2);
}

static struct worker *check_thread(lua_State *L)
{
    return *(struct worker **)luaL_checkudata(L, 1, THREAD_TYPE);
}

/* thread:get(name): a copy of the thread's global name. */
static int thread_get(lua_State *L)
{
    struct worker *w = check_thread(L);
    const char *name = luaL_checkstring(L, 2);
    lua_State *T = w->script->L;
    lua_getglobal(T, name);
    transfer(L, T, -1, L, "from");
    lua_pop(T, 1);
    return 1;
}

/* thread:set(name, value): a copy of value as the thread's global name. */
static int thread_set(lua_State *L)
{
    struct worker *w = check_thread(L);
    const char *name = luaL_checkstring(L, 2);
    lua_State *T = w->script->L;
    luaL_checkany(L, 3);
    transfer(L, L, 3, T, "to");
    lua_setglobal(T, name);
    return 0;
}

/* thread:stop(): the thread ends its run; when every thread has, so does volley. */
static int thread_stop(lua_State *L)
{
    worker_finish(check_thread(L));
    return 0;
}

static int thread_index(lua_State *L)
{
    struct worker *w = check_thread(L);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "addr") == 0)
        push_addr(L, &w->addr);
    else if (strcmp(key, "get") == 0)
        lua_pushcfunction(L, thread_get);
    else if (strcmp(key, "set") == 0)
        lua_pushcfunction(L, thread_set);
    else if (strcmp(key, "stop") == 0)
        lua_pushcfunction(L, thread_stop);
    else
        lua_pushnil(L);
    return 1;
}

static int thread_newindex(lua_State *L)
{
    struct worker *w = check_thread(L);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "addr") != 0)
        return luaL_error(L, "cannot set '%s' on a thread (only addr can be set)", key);
    w->addr = *(struct net_addr *)luaL_checkudata(L, 3, ADDR_TYPE);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Statistics userdata: latency and requests in done()                        */
/* ------------------------------------------------------------------------ */

static const struct hist *check_stats(lua_State *L)
{
    return *(const struct hist **)luaL_checkudata(L, 1, STATS_TYPE);
}

static int stats_percentile(lua_State *L)
{
    const struct hist *h = check_stats(L);
    lua_pushnumber(L, (lua_Number)hist_percentile(h, luaL_checknumber(L, 2)));
    return 1;
}

static int stats_index(lua_State *L)
{
    const struct hist *h = check_stats(L);
    const char *key = lua_tostring(L, 2);
    if (!key || lua_type(L, 2) != LUA_TSTRING)
        lua_pushnil(L);
    else if (strcmp(key, "min") == 0)
        lua_pushnumber(L, (lua_Number)hist_min(h));
    else if (strcmp(key, "max") == 0)
        lua_pushnumber(L, (lua_Number)hist_max(h));
    else if (strcmp(key, "mean") == 0)
        lua_pushnumber(L, hist_mean(h));
    else if (strcmp(key, "stdev") == 0)
        lua_pushnumber(L, hist_stdev(h));
    else if (strcmp(key, "percentile") == 0)
        lua_pushcfunction(L, stats_percentile);
    else
        lua_pushnil(L);
    return 1;
}

/* #stats: the number of distinct values recorded. */
static int stats_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)hist_distinct(check_stats(L)));
    return 1;
}

/* stats(i): the i-th distinct value (ascending, from 1) and its count. Out
 * of range gives 0 and the number of distinct values, as in wrk. */
static int stats_call(lua_State *L)
{
    const struct hist *h = check_stats(L);
    lua_Integer i = luaL_checkinteger(L, 2);
    uint64_t value, count;
    if (i < 1 || !hist_distinct_at(h, (size_t)(i - 1), &value, &count)) {
        value = 0;
        count = hist_distinct(h);
    }
    lua_pushnumber(L, (lua_Number)value);
    lua_pushnumber(L, (lua_Number)count);
    return 2;
}

static void push_stats(lua_State *L, const struct hist *h)
{
    const struct hist **u = lua_newuserdata(L, sizeof *u);
    *u = h;
    luaL_getmetatable(L, STATS_TYPE);
    lua_setmetatable(L, -2);
}

/* ------------------------------------------------------------------------ */
/* States                                                                     */
/* ------------------------------------------------------------------------ */

static void register_types(lua_State *L)
{
    luaL_newmetatable(L, ADDR_TYPE);
    lua_pushcfunction(L, addr_tostring);
    lua_setfield(L, -2, "__tostring");
    luaL_newmetatable(L, THREAD_TYPE);
    lua_pushcfunction(L, thread_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, thread_newindex);
    lua_setfield(L, -2, "__newindex");
    luaL_newmetatable(L, STATS_TYPE);
    lua_pushcfunction(L, stats_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, stats_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, stats_call);
    lua_setfield(L, -2, "__call");
    lua_pop(L, 3);
}

/* wrk's fields from the command line, on the module table at the top. */
static void set_fields(lua_State *L, const struct config *cfg)
{
    const struct url *u = &cfg->url;
    lua_pushstring(L, u->scheme);
    lua_setfield(L, -2, "scheme");
    lua_pushstring(L, u->host);
    lua_setfield(L, -2, "host");
    if (u->port) {
        lua_pushstring(L, u->port);
        lua_setfield(L, -2, "port");
    }
    lua_pushstring(L, u->path);
    lua_setfield(L, -2, "path");
    lua_getfield(L, -1, "headers");
    for (size_t i = 0; i < cfg->nheaders; i++) {
        lua_pushstring(L, cfg->headers[i].value);
        lua_setfield(L, -2, cfg->headers[i].name);
    }
    lua_pop(L, 1);
}

static struct script *state_new(const struct config *cfg, struct worker *w)
{
    struct script *s = xcalloc(1, sizeof *s);
    s->cfg = cfg;
    s->worker = w;
    s->request_ref = s->response_ref = s->delay_ref = LUA_NOREF;
    lua_State *L = s->L = luaL_newstate();
    if (!L)
        die("unable to create a Lua state");
    luaL_openlibs(L);
    lua_pushcfunction(L, on_error); /* HANDLER */
    register_types(L);
    lua_pushinteger(L, (lua_Integer)(cfg->timeout_us / 1000));
    lua_setfield(L, LUA_REGISTRYINDEX, "volley.timeout_ms");

    if (luaL_loadbuffer(L, wrk_lua, sizeof wrk_lua - 1, "@wrk.lua") != 0)
        fatal(L);
    call(s, 0, 1);
    lua_pushlightuserdata(L, &s->scratch);
    lua_pushvalue(L, -2);
    lua_pushcclosure(L, wrk_format, 2);
    lua_setfield(L, -2, "format");
    lua_pushcfunction(L, wrk_lookup);
    lua_setfield(L, -2, "lookup");
    lua_pushcfunction(L, wrk_connect);
    lua_setfield(L, -2, "connect");
    set_fields(L, cfg);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "wrk");
    lua_pop(L, 2);
    lua_setglobal(L, "wrk");

    if (luaL_loadfile(L, cfg->script) != 0)
        fatal(L);
    call(s, 0, 0);
    return s;
}

struct script *script_main_new(const struct config *cfg) { return state_new(cfg, NULL); }

struct script *script_thread_new(const struct config *cfg, struct worker *w)
{
    return state_new(cfg, w);
}

void script_free(struct script *s)
{
    if (!s)
        return;
    lua_close(s->L);
    buf_free(&s->scratch);
    free(s);
}

/* Pushes wrk[name] (a function of the module). */
static void push_wrk_function(lua_State *L, const char *name)
{
    lua_getglobal(L, "wrk");
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
}

void script_setup(struct script *main, struct worker *w)
{
    push_wrk_function(main->L, "setup");
    push_thread(main->L, w);
    call(main, 1, 0);
}

static int global_function_ref(lua_State *L, const char *name)
{
    lua_getglobal(L, name);
    if (lua_isfunction(L, -1))
        return luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1);
    return LUA_NOREF;
}

/* Which of (status, headers, body) response() declares: building the
 * headers table and body string costs, so only what is used is built.
 * Lua 5.1 cannot tell, and then gets all three. */
static void response_params(struct script *s)
{
    lua_State *L = s->L;
    s->response_head = s->response_body = true;
    lua_getglobal(L, "debug");
    lua_getfield(L, -1, "getinfo");
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->response_ref);
    lua_pushliteral(L, "u");
    call(s, 2, 1);
    lua_getfield(L, -1, "nparams");
    lua_getfield(L, -2, "isvararg");
    if (lua_isnumber(L, -2) && !lua_toboolean(L, -1)) {
        lua_Integer n = lua_tointeger(L, -2);
        s->response_head = n >= 2;
        s->response_body = n >= 3;
    }
    lua_pop(L, 4);
}

/* The args table for init(): [0] the URL, then the arguments after it. */
static void push_args(lua_State *L, const struct config *cfg)
{
    lua_createtable(L, (int)cfg->nscript_args, 1);
    lua_pushstring(L, cfg->url_arg);
    lua_rawseti(L, -2, 0);
    for (size_t i = 0; i < cfg->nscript_args; i++) {
        lua_pushstring(L, cfg->script_args[i]);
        lua_rawseti(L, -2, (int)i + 1);
    }
}

/* Parse bytes a script produced into r, or exit with wrk's message. */
static void set_request(struct request *r, const char *data, size_t len)
{
    char err[128];
    char *copy = xmalloc(len + 1);
    memcpy(copy, data, len);
    copy[len] = '\0';
    if (!request_set(r, copy, len, err, sizeof err))
        die("%s", err);
}

void script_init(struct script *s, struct request *r)
{
    lua_State *L = s->L;
    lua_getglobal(L, "wrk");
    push_thread(L, s->worker);
    lua_setfield(L, -2, "thread");
    lua_pop(L, 1);
    push_wrk_function(L, "init");
    push_args(L, s->cfg);
    call(s, 1, 1);
    size_t len;
    const char *data = lua_tolstring(L, -1, &len);
    set_request(r, data, len);
    lua_pop(L, 1);
    s->request_ref = global_function_ref(L, "request");
    s->response_ref = global_function_ref(L, "response");
    s->delay_ref = global_function_ref(L, "delay");
    if (s->response_ref != LUA_NOREF)
        response_params(s);
}

/* Calls request() and leaves the string it returned on the stack. */
static const char *call_request(struct script *s, size_t *len)
{
    lua_State *L = s->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->request_ref);
    call(s, 0, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
        lua_pushfstring(L, "%s: request() returned %s instead of a string", s->cfg->script,
                        luaL_typename(L, -1));
        fatal(L);
    }
    return lua_tolstring(L, -1, len);
}

size_t script_verify(struct script *s)
{
    struct request r = {0};
    size_t len;
    const char *data = call_request(s, &len);
    set_request(&r, data, len);
    lua_pop(s->L, 1);
    size_t depth = r.depth;
    request_free(&r);
    return depth;
}

bool script_has_request(const struct script *s) { return s->request_ref != LUA_NOREF; }
bool script_has_delay(const struct script *s) { return s->delay_ref != LUA_NOREF; }
bool script_has_response(const struct script *s) { return s->response_ref != LUA_NOREF; }

bool script_response_wants(const struct script *s, bool *head, bool *body)
{
    *head = s->response_head;
    *body = s->response_body;
    return s->response_ref != LUA_NOREF;
}

void script_request(struct script *s, struct request *r)
{
    size_t len;
    const char *data = call_request(s, &len);
    /* Most scripts return the same bytes every time (pipeline.lua, or a
     * request picked from a few): then the batch is already right. */
    if (r->data && len == r->len && memcmp(data, r->data, len) == 0) {
        lua_pop(s->L, 1);
        return;
    }
    if (len + 1 > r->cap) {
        r->cap = len + 1;
        r->data = xrealloc(r->data, r->cap);
    }
    memcpy(r->data, data, len);
    r->data[len] = '\0';
    r->len = len;
    lua_pop(s->L, 1);
    /* The depth stays what verification found (as in wrk); which of the
     * requests are HEAD requests is looked up only when one may be. */
    if (memmem(r->data, len, "HEAD", 4)) {
        char err[128];
        if (!r->heads)
            r->heads = xcalloc(r->depth, sizeof *r->heads);
        memset(r->heads, 0, r->depth * sizeof *r->heads);
        http_request_parse(r->data, len, r->heads, r->depth, err, sizeof err);
    } else if (r->heads) {
        memset(r->heads, 0, r->depth * sizeof *r->heads);
    }
}

double script_delay(struct script *s)
{
    lua_State *L = s->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->delay_ref);
    call(s, 0, 1);
    double ms = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return ms > 0 ? ms : 0;
}

/* HTTP/2 names are lower case; a script written for HTTP/1.1 looks them
 * up as the server spelt them (headers["X-Token"]): the table answers any
 * spelling, while pairs() shows the names as they came. */
static const char lower_index[] = "local rawget, type, lower = rawget, type, string.lower\n"
                                  "return { __index = function(t, k)\n"
                                  "    if type(k) == 'string' then return rawget(t, lower(k)) end\n"
                                  "end }\n";

static void push_headers(lua_State *L, const struct proto_response *r)
{
    const char *name, *value;
    size_t pos = 0, name_len, value_len;
    lua_newtable(L);
    while (http_field_next(r->fields, r->fields_len, &pos, &name, &name_len, &value, &value_len)) {
        lua_pushlstring(L, name, name_len);
        lua_pushlstring(L, value, value_len);
        lua_rawset(L, -3);
    }
    if (r->lower_case) {
        lua_getfield(L, LUA_REGISTRYINDEX, "volley.lower_index");
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            if (luaL_loadstring(L, lower_index) != 0)
                fatal(L);
            lua_call(L, 0, 1);
            lua_pushvalue(L, -1);
            lua_setfield(L, LUA_REGISTRYINDEX, "volley.lower_index");
        }
        lua_setmetatable(L, -2);
    }
}

void script_response(struct script *s, const struct proto_response *r)
{
    lua_State *L = s->L;
    int n = 1;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->response_ref);
    lua_pushinteger(L, r->status);
    if (s->response_head || s->response_body) {
        push_headers(L, r);
        n++;
    }
    if (s->response_body) {
        lua_pushlstring(L, r->body ? r->body : "", r->body_len);
        n++;
    }
    call(s, n, 0);
}

bool script_has_done(const struct script *main)
{
    lua_getglobal(main->L, "done");
    bool yes = lua_isfunction(main->L, -1);
    lua_pop(main->L, 1);
    return yes;
}

static void set_number(lua_State *L, const char *name, uint64_t v)
{
    lua_pushnumber(L, (lua_Number)v);
    lua_setfield(L, -2, name);
}

void script_done(struct script *main, const struct result *r)
{
    lua_State *L = main->L;
    const struct stats *st = &r->stats;
    lua_getglobal(L, "done");
    if (!lua_isfunction(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    lua_newtable(L);
    set_number(L, "duration", r->runtime_us);
    set_number(L, "requests", st->requests);
    set_number(L, "bytes", st->bytes);
    lua_newtable(L);
    set_number(L, "connect", st->errors.connect);
    set_number(L, "read", st->errors.read);
    set_number(L, "write", st->errors.write);
    set_number(L, "status", st->errors.status);
    set_number(L, "timeout", st->errors.timeout);
    lua_setfield(L, -2, "errors");
    push_stats(L, st->latency);
    push_stats(L, st->rps);
    call(main, 3, 0);
    fflush(stdout);
}
