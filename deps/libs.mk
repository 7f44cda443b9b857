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

# HTTP/3 (--http3): QUIC from ngtcp2, its TLS handshake through ngtcp2's
# GnuTLS helper, and HTTP/3 framing and QPACK from nghttp3. Optional: when
# pkg-config finds no ngtcp2 >= 1.11, nghttp3 >= 1.8 and their GnuTLS helper,
# volley builds without HTTP/3 (deps/install.sh installs them; on Debian 12
# from bookworm-backports). HTTP3=0 leaves them out, HTTP3=1 insists on them.
HTTP3_PKGS = libngtcp2_crypto_gnutls libngtcp2 >= 1.11 libnghttp3 >= 1.8 gnutls
ifeq ($(origin HTTP3),undefined)
HTTP3 := $(shell $(PKG_CONFIG) --exists '$(HTTP3_PKGS)' 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(HTTP3),1)
ifeq ($(origin NGTCP2_CFLAGS),undefined)
NGTCP2_CFLAGS := $(shell $(PKG_CONFIG) --cflags libngtcp2_crypto_gnutls libngtcp2 2>/dev/null)
endif
ifeq ($(origin NGTCP2_LIBS),undefined)
NGTCP2_LIBS := $(or $(shell $(PKG_CONFIG) --libs libngtcp2_crypto_gnutls libngtcp2 2>/dev/null),\
                 -lngtcp2_crypto_gnutls -lngtcp2)
endif
ifeq ($(origin NGHTTP3_CFLAGS),undefined)
NGHTTP3_CFLAGS := $(shell $(PKG_CONFIG) --cflags libnghttp3 2>/dev/null)
endif
ifeq ($(origin NGHTTP3_LIBS),undefined)
NGHTTP3_LIBS := $(or $(shell $(PKG_CONFIG) --libs libnghttp3 2>/dev/null),-lnghttp3)
endif
ifeq ($(origin GNUTLS_CFLAGS),undefined)
GNUTLS_CFLAGS := $(shell $(PKG_CONFIG) --cflags gnutls 2>/dev/null)
endif
ifeq ($(origin GNUTLS_LIBS),undefined)
GNUTLS_LIBS := $(or $(shell $(PKG_CONFIG) --libs gnutls 2>/dev/null),-lgnutls)
endif
HTTP3_CPPFLAGS = -DVOLLEY_HTTP3 $(NGTCP2_CFLAGS) $(NGHTTP3_CFLAGS) $(GNUTLS_CFLAGS)
HTTP3_LIBS = $(NGTCP2_LIBS) $(NGHTTP3_LIBS) $(GNUTLS_LIBS)
else ifneq ($(HTTP3),0)
$(error HTTP3 is 0 or 1, not '$(HTTP3)')
endif

# Snappy compresses what --remote-write pushes (Prometheus' remote-write
# protocol requires it). Optional: without libsnappy volley builds, and
# --remote-write says in one line how to get it. SNAPPY=0 leaves it out,
# SNAPPY=1 insists on it. Debian's libsnappy-dev has a .pc file; elsewhere the
# fallback is plain -lsnappy (the library is C++: a static link adds -lstdc++).
ifeq ($(origin SNAPPY),undefined)
SNAPPY := $(shell $(PKG_CONFIG) --exists snappy 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(SNAPPY),1)
ifeq ($(origin SNAPPY_CFLAGS),undefined)
SNAPPY_CFLAGS := $(shell $(PKG_CONFIG) --cflags snappy 2>/dev/null)
endif
ifeq ($(origin SNAPPY_LIBS),undefined)
SNAPPY_LIBS := $(or $(shell $(PKG_CONFIG) --libs snappy 2>/dev/null),-lsnappy)
endif
SNAPPY_CPPFLAGS = -DVOLLEY_SNAPPY $(SNAPPY_CFLAGS)
else ifneq ($(SNAPPY),0)
$(error SNAPPY is 0 or 1, not '$(SNAPPY)')
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
