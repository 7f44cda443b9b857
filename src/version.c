/* The version line: volley's own version (set once, in the Makefile), the
 * libev backend the worker loops will use, and the Lua, OpenSSL and nghttp2
 * in use, with ngtcp2, nghttp3 and GnuTLS when built with HTTP/3 (the
 * libraries loaded at run time, not the headers built with).
 * SPDX-License-Identifier: MIT */
#include "version.h"

#include <ev.h>
#include <lua.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <stdio.h>
#ifdef VOLLEY_HTTP3
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#endif

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
    static char line[320];
    char http3[96] = "";
#ifdef VOLLEY_HTTP3
    snprintf(http3, sizeof http3, ", ngtcp2 %s, nghttp3 %s, GnuTLS %s",
             ngtcp2_version(0)->version_str, nghttp3_version(0)->version_str,
             gnutls_check_version(NULL));
#endif
    snprintf(line, sizeof line, "volley %s [%s] (%s, %s, nghttp2 %s%s)", VOLLEY_VERSION,
             backend_name(ev_recommended_backends() & ev_supported_backends()), LUA_NAME,
             OpenSSL_version(OPENSSL_VERSION), nghttp2_version(0)->version_str, http3);
    return line;
}
