/* The version line: volley's own version (set once, in the Makefile), the
 * libev backend the worker loops will use, and the Lua, OpenSSL and nghttp2
 * in use (the libraries loaded at run time, not the headers built with).
 * SPDX-License-Identifier: MIT */
#include "version.h"

#include <ev.h>
#include <lua.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <stdio.h>

#if __has_include(<luajit.h>)
#include <luajit.h>
#define LUA_NAME LUAJIT_VERSION
#else
#define LUA_NAME LUA_RELEASE
#endif

static const char *backend_name(unsigned int b)
{
    if (b & EVBACKEND_EPOLL)
        return "epoll";
    if (b & EVBACKEND_KQUEUE)
        return "kqueue";
    if (b & EVBACKEND_PORT)
        return "evport";
    if (b & EVBACKEND_POLL)
        return "poll";
    return "select";
}

const char *version_line(void)
{
    static char line[256];
    snprintf(line, sizeof line, "volley %s [%s] (%s, %s, nghttp2 %s)", VOLLEY_VERSION,
             backend_name(ev_recommended_backends() & ev_supported_backends()), LUA_NAME,
             OpenSSL_version(OPENSSL_VERSION), nghttp2_version(0)->version_str);
    return line;
}
