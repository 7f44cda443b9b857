/* The Lua bridge. Every state gets the standard libraries, the wrk module
 * (src/wrk.lua, embedded at build time) with wrk.format, wrk.lookup and
 * wrk.connect written in C, and the userdata types a script meets: server
 * addresses, threads and statistics. Hooks run under lua_pcall with a
 * traceback handler; an error in any of them ends volley with the message.
 * Hooks are global functions, looked up without metamethods (a strict-mode
 * _G cannot turn a look-up into an error) and with interned names kept on
 * the stack, so noticing that a script defined, replaced or removed one
 * during the run costs one table look-up per call, as in wrk, which looks
 * the global up on every call.
 * SPDX-License-Identifier: MIT */
#include "script.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cli.h"
#include "hist.h"
#include "http.h"
#include "http_request.h"
#include "net.h"
#include "proto.h"
#include "report.h"
#include "request.h"
#include "script_wrk.h"
#include "wrk_lua.h"
#include "xalloc.h"

#define THREAD_TYPE "volley.thread"
#define STATS_TYPE "volley.stats"
/* Stack slots every state keeps below whatever a call pushes: the error
 * handler, debug.getinfo and the wrk module as they were before the script
 * ran (a script may replace the globals), then for each per-request hook
 * its name and the value it had at the last look. */
#define HANDLER 1
#define GETINFO 2
#define MODULE 3
#define HOOK_NAME(h) (4 + 2 * (int)(h))
#define HOOK_SEEN(h) (5 + 2 * (int)(h))
/* thread:get/set copy tables this deep at most. */
#define COPY_DEPTH 64

enum hook { HOOK_REQUEST, HOOK_RESPONSE, HOOK_DELAY, HOOKS };
static const char *const hook_names[HOOKS] = {"request", "response", "delay"};

struct script {
    lua_State *L;
    const struct config *cfg;
    struct script_thread *thread; /* NULL for the main state */
    bool defined[HOOKS];          /* whether each hook was a function at the last look */
    const void *seen[HOOKS];      /* the value then (kept in HOOK_SEEN, so never reused) */
    bool response_head, response_body;
    struct buf scratch; /* wrk.format's output */
    const char *hook;   /* what runs now ("in init()"), for os.exit's message */
    bool exiting;       /* os.exit() stopped the worker: no more of the script runs */
};

/* What the state runs, as os.exit's message says it. */
static const char AT_TOP[] = "at the top level", IN_SETUP[] = "in setup()", IN_INIT[] = "in init()",
                  IN_REQUEST[] = "in request()", IN_RESPONSE[] = "in response()",
                  IN_DELAY[] = "in delay()", IN_DONE[] = "in done()";

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */
/* ------------------------------------------------------------------------ */

/* The string at idx, whole: a NUL in it is written \0 rather than
 * ending the message there. Free it. */
static char *whole_string(lua_State *L, int idx)
{
    size_t len, nuls = 0;
    const char *msg = lua_tolstring(L, idx, &len);
    if (!msg)
        return xstrdup("(error object is not a string)");
    for (size_t i = 0; i < len; i++)
        nuls += msg[i] == '\0';
    char *out = xmalloc(len + nuls + 1), *o = out;
    for (size_t i = 0; i < len; i++) {
        if (msg[i] == '\0') {
            *o++ = '\\';
            *o++ = '0';
        } else {
            *o++ = msg[i];
        }
    }
    *o = '\0';
    return out;
}

/* The error message on top of the stack ends volley: at once on the main
 * thread (no worker runs then: setup, init and done run before the workers
 * start or after they ended); on a running worker thread, the thread stops
 * and main reports it once every worker has stopped (its fail()). */
static void failed(struct script *s)
{
    char *msg = whole_string(s->L, -1);
    if (!s->thread || !*s->thread->running)
        die("%s", msg);
    s->thread->fail(s->thread->arg, msg);
    free(msg);
    lua_pop(s->L, 1);
}

/* "file:line: " of the innermost Lua function on the stack (the one that
 * raised an error, or called os.exit), or "" when there is none. */
static void push_where(lua_State *L)
{
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
            lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
            return;
        }
    }
    lua_pushliteral(L, "");
}

/* An error object that is not a string: what its __tostring makes of it (as
 * Lua's own interpreter prints it), or its type, after where it was raised,
 * which error() adds only to strings. */
static void describe_error_object(lua_State *L)
{
    push_where(L);
    if (luaL_getmetafield(L, 1, "__tostring")) {
        lua_pushvalue(L, 1);
        if (lua_pcall(L, 1, 1, 0) == 0 && lua_type(L, -1) == LUA_TSTRING) {
            lua_concat(L, 2);
            return;
        }
        lua_pop(L, 1);
        lua_pushfstring(L, "(error object is a %s value; its __tostring failed)",
                        luaL_typename(L, 1));
    } else {
        lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    lua_concat(L, 2);
}

/* The message handler: the error plus a traceback of where it happened,
 * from the debug.traceback saved before the script ran (upvalue 1). The
 * traceback is asked for without the message (LuaJIT's would cut it at a
 * NUL) and joined to it after. */
static int on_error(lua_State *L)
{
    if (!lua_isstring(L, 1))
        describe_error_object(L);
    else
        lua_pushvalue(L, 1);
    if (lua_isfunction(L, lua_upvalueindex(1))) {
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_pushliteral(L, "");
        lua_pushinteger(L, 2);
        lua_call(L, 2, 1);
        lua_concat(L, 2);
    }
    return 1;
}

/* os.exit(status, close) in every state. LuaJIT's calls exit() on the thread
 * that runs the script, and its atexit clean-up of OpenSSL crashes the other
 * workers when they are inside OpenSSL. Before the run (the top level,
 * setup, init, the first request()) and in done() no worker runs: volley
 * says so and ends with status at once. On a running worker the worker
 * stops (its exit()), main ends the run in order, with its report, and
 * exits with status; the error raised here unwinds the hook, and no more of
 * the script runs on that thread, even if a pcall in it caught the error.
 * As in LuaJIT, true is EXIT_SUCCESS and false EXIT_FAILURE; close is
 * ignored (the state is closed anyway). */
static int os_exit(lua_State *L)
{
    struct script *s = lua_touserdata(L, lua_upvalueindex(1));
    int status = lua_isboolean(L, 1) ? (lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE)
                                     : (int)luaL_optinteger(L, 1, EXIT_SUCCESS);
    push_where(L);
    lua_pushfstring(L, "os.exit(%d) %s", status, s->hook ? s->hook : AT_TOP);
    lua_concat(L, 2);
    char *msg = whole_string(L, -1);
    if (!s->thread || !*s->thread->running) {
        if (s->hook == IN_DONE)
            die_status(status, "%s", msg);
        die_status(status, "%s: the run did not start", msg);
    }
    s->exiting = true;
    s->thread->exit(s->thread->arg, status, msg);
    free(msg);
    return lua_error(L);
}

/* Calls the function below its nargs arguments. Returns false after an
 * error (reported by failed()) or os.exit(), with nresults nils in place of
 * results. */
static bool call(struct script *s, int nargs, int nresults)
{
    lua_State *L = s->L;
    int base = lua_gettop(L) - nargs - 1;
    int rc = s->exiting ? LUA_ERRRUN : lua_pcall(L, nargs, nresults, HANDLER);
    /* os.exit() sets exiting during the call, even under the script's pcall */
    if (s->exiting)
        lua_settop(L, base);
    else if (rc == 0)
        return true;
    else
        failed(s);
    for (int i = 0; i < nresults; i++)
        lua_pushnil(L);
    return false;
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

static void push_thread(lua_State *L, struct script_thread *t)
{
    struct script_thread **u = lua_newuserdata(L, sizeof *u);
    *u = t;
    luaL_getmetatable(L, THREAD_TYPE);
    lua_setmetatable(L, -2);
}

static struct script_thread *check_thread(lua_State *L)
{
    return *(struct script_thread **)luaL_checkudata(L, 1, THREAD_TYPE);
}

/* thread:get(name): a copy of the thread's global name. Globals are read
 * and written without metamethods, so a strict-mode _G in the thread's
 * state cannot raise an error there, where nothing would catch it. */
static int thread_get(lua_State *L)
{
    struct script_thread *t = check_thread(L);
    luaL_checkstring(L, 2);
    lua_State *T = t->script->L;
    lua_pushstring(T, lua_tostring(L, 2));
    lua_rawget(T, LUA_GLOBALSINDEX);
    transfer(L, T, -1, L, "from");
    lua_pop(T, 1);
    return 1;
}

/* thread:set(name, value): a copy of value as the thread's global name. */
static int thread_set(lua_State *L)
{
    struct script_thread *t = check_thread(L);
    const char *name = luaL_checkstring(L, 2);
    lua_State *T = t->script->L;
    luaL_checkany(L, 3);
    lua_pushstring(T, name);
    transfer(L, L, 3, T, "to");
    lua_rawset(T, LUA_GLOBALSINDEX);
    return 0;
}

/* thread:stop(): the thread ends its run; when every thread has, so does volley. */
static int thread_stop(lua_State *L)
{
    struct script_thread *t = check_thread(L);
    t->stop(t->arg);
    return 0;
}

static int thread_index(lua_State *L)
{
    struct script_thread *t = check_thread(L);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "addr") == 0)
        script_push_addr(L, t->addr);
    else if (strcmp(key, "get") == 0)
        lua_pushcfunction(L, thread_get);
    else if (strcmp(key, "set") == 0)
        lua_pushcfunction(L, thread_set);
    else if (strcmp(key, "stop") == 0)
        lua_pushcfunction(L, thread_stop);
    else
        lua_settop(L, 2); /* wrk returns the key (as a string) for any other field */
    return 1;
}

static int thread_newindex(lua_State *L)
{
    struct script_thread *t = check_thread(L);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "addr") != 0)
        return luaL_error(L, "cannot set '%s' on a thread (only addr can be set)", key);
    *t->addr = *script_check_addr(L, 3);
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
    const char *key = lua_tostring(L, 2); /* a number key becomes a string, as in wrk */
    if (!key)
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
        lua_settop(L, 2); /* wrk returns the key for any other field: a script's
                           * "requests.total" concatenates as "total" */
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
    lua_pop(L, 2);
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
    for (size_t i = 0; i < cfg->spec.nheaders; i++) {
        lua_pushstring(L, cfg->spec.headers[i].value);
        lua_setfield(L, -2, cfg->spec.headers[i].name);
    }
    lua_pop(L, 1);
}

/* Errors while a state is made (the script failing to load or at its top
 * level) happen on the main thread, before any worker runs. */
static void fatal(lua_State *L) __attribute__((noreturn));
static void fatal(lua_State *L) { die("%s", whole_string(L, -1)); }

/* Pushes debug[name] as the standard library made it. */
static void push_debug(lua_State *L, const char *name)
{
    lua_getfield(L, LUA_GLOBALSINDEX, "debug");
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
}

/* volley calls the module it made, whatever the script does with the global
 * wrk; a script that replaces the table (wrk = {method = "POST"}) would
 * otherwise see its fields silently ignored. */
static void check_module(struct script *s)
{
    lua_State *L = s->L;
    lua_pushliteral(L, "wrk");
    lua_rawget(L, LUA_GLOBALSINDEX);
    if (!lua_rawequal(L, -1, MODULE))
        die("%s: the script replaced the global wrk (with %s): set its fields instead, as in "
            "wrk.method = \"POST\"",
            s->cfg->spec.script, lua_istable(L, -1) ? "another table" : luaL_typename(L, -1));
    lua_pop(L, 1);
}

static struct script *state_new(const struct config *cfg, struct script_thread *thread)
{
    struct script *s = xcalloc(1, sizeof *s);
    s->cfg = cfg;
    s->thread = thread;
    if (thread)
        thread->script = s; /* before the script runs: it may reach the thread */
    lua_State *L = s->L = luaL_newstate();
    if (!L)
        die("unable to create a Lua state");
    luaL_openlibs(L);
    lua_getglobal(L, "os");
    lua_pushlightuserdata(L, s);
    lua_pushcclosure(L, os_exit, 1);
    lua_setfield(L, -2, "exit");
    lua_pop(L, 1);
    push_debug(L, "traceback");
    lua_pushcclosure(L, on_error, 1); /* HANDLER */
    push_debug(L, "getinfo");         /* GETINFO */
    register_types(L);

    if (luaL_loadbuffer(L, wrk_lua, sizeof wrk_lua - 1, "@wrk.lua") != 0)
        fatal(L);
    call(s, 0, 1); /* MODULE */
    script_wrk_install(L, MODULE, &s->scratch, cfg->spec.timeout_us / 1000);
    set_fields(L, cfg);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_pushvalue(L, MODULE);
    lua_setfield(L, -2, "wrk");
    lua_pop(L, 2);
    lua_pushvalue(L, MODULE);
    lua_setglobal(L, "wrk");
    for (int h = 0; h < HOOKS; h++) {
        lua_pushstring(L, hook_names[h]); /* HOOK_NAME(h) */
        lua_pushnil(L);                   /* HOOK_SEEN(h) */
    }

    if (luaL_loadfile(L, cfg->spec.script) != 0)
        fatal(L);
    s->hook = AT_TOP;
    call(s, 0, 0);
    check_module(s);
    return s;
}

struct script *script_main_new(const struct config *cfg) { return state_new(cfg, NULL); }

struct script *script_thread_new(const struct config *cfg, struct script_thread *thread)
{
    return state_new(cfg, thread);
}

void script_free(struct script *s)
{
    if (!s)
        return;
    lua_close(s->L);
    buf_free(&s->scratch);
    free(s);
}

/* Pushes module[name] (one of its functions). */
static void push_module_field(lua_State *L, const char *name)
{
    lua_pushstring(L, name);
    lua_rawget(L, MODULE);
}

void script_setup(struct script *main, struct script_thread *thread)
{
    push_module_field(main->L, "setup");
    push_thread(main->L, thread);
    main->hook = IN_SETUP;
    call(main, 1, 0);
}

/* ------------------------------------------------------------------------ */
/* Per-request hooks                                                         */
/* ------------------------------------------------------------------------ */

/* Which of (status, headers, body) the response() on top of the stack
 * declares: building the headers table and body string costs, so only what
 * is used is built. Lua 5.1 cannot tell, and then gets all three. */
static void response_params(struct script *s)
{
    lua_State *L = s->L;
    s->response_head = s->response_body = true;
    lua_pushvalue(L, GETINFO);
    lua_pushvalue(L, -2);
    lua_pushliteral(L, "u");
    call(s, 2, 1);
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "nparams");
        lua_getfield(L, -2, "isvararg");
        if (lua_isnumber(L, -2) && !lua_toboolean(L, -1)) {
            lua_Integer n = lua_tointeger(L, -2);
            s->response_head = n >= 2;
            s->response_body = n >= 3;
        }
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
}

/* Whether the script defines hook h now; if it does, pushes it. The value
 * is compared with the one the last look found, so a hook defined, replaced
 * or removed by the script (a response() that switches request() after a
 * login) is noticed at its next use. */
static bool look(struct script *s, enum hook h)
{
    lua_State *L = s->L;
    lua_pushvalue(L, HOOK_NAME(h));
    lua_rawget(L, LUA_GLOBALSINDEX);
    /* Comparing addresses is cheaper than lua_rawequal. Values without one
     * (nil, numbers, strings) compare equal, but none is a function. */
    const void *value = lua_topointer(L, -1);
    if (value != s->seen[h]) {
        s->seen[h] = value;
        lua_pushvalue(L, -1);
        lua_replace(L, HOOK_SEEN(h));
        s->defined[h] = lua_isfunction(L, -1);
        if (h == HOOK_RESPONSE && s->defined[h])
            response_params(s);
    }
    if (s->defined[h])
        return true;
    lua_pop(L, 1);
    return false;
}

/* The args table for init(): [0] the URL, then the arguments after it. */
static void push_args(lua_State *L, const struct config *cfg)
{
    lua_createtable(L, (int)cfg->spec.nscript_args, 1);
    lua_pushstring(L, cfg->spec.url);
    lua_rawseti(L, -2, 0);
    for (size_t i = 0; i < cfg->spec.nscript_args; i++) {
        lua_pushstring(L, cfg->spec.script_args[i]);
        lua_rawseti(L, -2, (int)i + 1);
    }
}

/* Parse request bytes into r, or end volley saying which request was wrong
 * (what) and where, in wrk's "<what> at <line>:<col>". */
static void set_request(struct script *s, struct request *r, const char *data, size_t len,
                        const char *what)
{
    char err[128];
    char *copy = xmalloc(len + 1);
    if (len)
        memcpy(copy, data, len);
    copy[len] = '\0';
    if (!request_set(r, copy, len, err, sizeof err))
        die("%s: %s: %s", s->cfg->spec.script, what, len ? err : "an empty string");
}

void script_init(struct script *s, struct request *r)
{
    lua_State *L = s->L;
    lua_pushliteral(L, "thread");
    push_thread(L, s->thread);
    lua_rawset(L, MODULE);
    push_module_field(L, "init");
    push_args(L, s->cfg);
    s->hook = IN_INIT;
    call(s, 1, 1);
    check_module(s);
    size_t len = 0;
    const char *data = lua_tolstring(L, -1, &len);
    set_request(s, r, data, len,
                "invalid request from wrk.method, wrk.path, wrk.headers, wrk.body");
    lua_pop(L, 1);
    for (int h = 0; h < HOOKS; h++)
        if (look(s, (enum hook)h))
            lua_pop(L, 1);
}

/* Calls request() if the script defines it now. SCRIPT_DONE leaves the
 * string it returned on the stack, at *data; a number counts as a string,
 * as Lua converts it. */
static enum script_call call_request(struct script *s, const char **data, size_t *len)
{
    lua_State *L = s->L;
    if (!look(s, HOOK_REQUEST))
        return SCRIPT_NONE;
    s->hook = IN_REQUEST;
    if (!call(s, 0, 1)) {
        lua_pop(L, 1);
        return SCRIPT_FAILED;
    }
    int type = lua_type(L, -1);
    if (type == LUA_TSTRING || type == LUA_TNUMBER) {
        *data = lua_tolstring(L, -1, len);
        return SCRIPT_DONE;
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        return SCRIPT_NIL;
    }
    lua_pushfstring(L, "%s: request() returned %s instead of a string", s->cfg->spec.script,
                    luaL_typename(L, -1));
    lua_remove(L, -2);
    failed(s);
    return SCRIPT_FAILED;
}

size_t script_verify(struct script *s)
{
    struct request r = {0};
    const char *data = NULL;
    size_t len = 0;
    if (call_request(s, &data, &len) != SCRIPT_DONE)
        die("%s: request() returned nil instead of a request", s->cfg->spec.script);
    set_request(s, &r, data, len, "request() returned an invalid request");
    lua_pop(s->L, 1);
    size_t depth = r.depth;
    request_free(&r);
    return depth;
}

static bool has_hook(struct script *s, enum hook h)
{
    bool yes = look(s, h);
    if (yes)
        lua_pop(s->L, 1);
    return yes;
}

bool script_has_request(struct script *s) { return has_hook(s, HOOK_REQUEST); }
bool script_has_delay(struct script *s) { return has_hook(s, HOOK_DELAY); }

bool script_response_wants(const struct script *s, bool *head, bool *body)
{
    bool yes = s->defined[HOOK_RESPONSE];
    *head = yes && s->response_head;
    *body = yes && s->response_body;
    return yes;
}

enum script_call script_request(struct script *s, struct request *r)
{
    const char *data;
    size_t len;
    enum script_call result = call_request(s, &data, &len);
    if (result != SCRIPT_DONE)
        return result;
    /* Most scripts return the same bytes every time (pipeline.lua, or a
     * request picked from a few): then the batch is already right. */
    if (r->data && len == r->len && memcmp(data, r->data, len) == 0) {
        lua_pop(s->L, 1);
        return SCRIPT_DONE;
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
    if (request_may_have_head(r)) {
        char err[128];
        if (!r->heads)
            r->heads = xcalloc(r->depth, sizeof *r->heads);
        memset(r->heads, 0, r->depth * sizeof *r->heads);
        http_request_parse(r->data, len, r->heads, r->depth, err, sizeof err);
    } else if (r->heads) {
        memset(r->heads, 0, r->depth * sizeof *r->heads);
    }
    return SCRIPT_DONE;
}

enum script_call script_delay(struct script *s, double *ms)
{
    lua_State *L = s->L;
    if (!look(s, HOOK_DELAY))
        return SCRIPT_NONE;
    s->hook = IN_DELAY;
    bool ok = call(s, 0, 1);
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    *ms = v > 0 ? v : 0;
    return ok ? SCRIPT_DONE : SCRIPT_FAILED;
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

enum script_call script_response(struct script *s, const struct proto_response *r)
{
    lua_State *L = s->L;
    int n = 1;
    if (!look(s, HOOK_RESPONSE))
        return SCRIPT_NONE;
    lua_pushinteger(L, r->status);
    if (s->response_head || s->response_body) {
        push_headers(L, r);
        n++;
    }
    if (s->response_body) {
        lua_pushlstring(L, r->body ? r->body : "", r->body_len);
        n++;
    }
    s->hook = IN_RESPONSE;
    return call(s, n, 0) ? SCRIPT_DONE : SCRIPT_FAILED;
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
    lua_pushliteral(L, "done");
    lua_rawget(L, LUA_GLOBALSINDEX);
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
    main->hook = IN_DONE;
    call(main, 3, 0);
    fflush(stdout);
}
