# How volley finds its system libraries: LuaJIT (or Lua 5.1), OpenSSL, libev,
# libnghttp2 and, where it is installed, liburing. Everything goes through
# $(PKG_CONFIG); libev ships no .pc file on Debian, so it falls back to plain
# -lev. Any of the *_CFLAGS / *_LIBS variables below may be given on the make
# command line instead.
# SPDX-License-Identifier: MIT

PKG_CONFIG ?= pkg-config

# The Lua 5.1 C API is common to LuaJIT, OpenResty's LuaJIT and PUC Lua 5.1;
# LuaJIT is preferred, the others are fallbacks.
ifeq ($(origin LUA_PKG),undefined)
LUA_PKG := $(firstword $(foreach p,luajit lua5.1 lua-5.1 lua51,\
             $(shell $(PKG_CONFIG) --exists $(p) 2>/dev/null && echo $(p))))
endif
ifeq ($(origin LUA_CFLAGS),undefined)
LUA_CFLAGS := $(if $(LUA_PKG),$(shell $(PKG_CONFIG) --cflags $(LUA_PKG)))
endif
ifeq ($(origin LUA_LIBS),undefined)
LUA_LIBS := $(if $(LUA_PKG),$(shell $(PKG_CONFIG) --libs $(LUA_PKG)),-lluajit-5.1)
endif

ifeq ($(origin SSL_CFLAGS),undefined)
SSL_CFLAGS := $(shell $(PKG_CONFIG) --cflags openssl 2>/dev/null)
endif
ifeq ($(origin SSL_LIBS),undefined)
SSL_LIBS := $(or $(shell $(PKG_CONFIG) --libs openssl 2>/dev/null),-lssl -lcrypto)
endif

ifeq ($(origin EV_CFLAGS),undefined)
EV_CFLAGS := $(shell $(PKG_CONFIG) --cflags libev 2>/dev/null)
endif
ifeq ($(origin EV_LIBS),undefined)
EV_LIBS := $(or $(shell $(PKG_CONFIG) --libs libev 2>/dev/null),-lev)
endif

# HTTP/2 framing, HPACK and flow control. Debian 12 ships 1.52: volley uses
# only the API that version has.
ifeq ($(origin NGHTTP2_CFLAGS),undefined)
NGHTTP2_CFLAGS := $(shell $(PKG_CONFIG) --cflags libnghttp2 2>/dev/null)
endif
ifeq ($(origin NGHTTP2_LIBS),undefined)
NGHTTP2_LIBS := $(or $(shell $(PKG_CONFIG) --libs libnghttp2 2>/dev/null),-lnghttp2)
endif

# io_uring (--engine io_uring), through liburing 2.3 or later (Debian 12's).
# Optional, as only Linux has it: without it, or with URING=0, volley builds
# with the epoll engine alone.
ifeq ($(origin URING),undefined)
URING := $(shell $(PKG_CONFIG) --atleast-version=2.3 liburing 2>/dev/null && echo 1)
endif
ifeq ($(origin URING_CFLAGS),undefined)
URING_CFLAGS := $(if $(filter 1,$(URING)),-DVOLLEY_URING $(shell $(PKG_CONFIG) --cflags liburing))
endif
ifeq ($(origin URING_LIBS),undefined)
URING_LIBS := $(if $(filter 1,$(URING)),$(or $(shell $(PKG_CONFIG) --libs liburing),-luring))
endif
