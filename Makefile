# volley: a Lua-scriptable HTTP benchmarking tool.
# GNU make, no configure step. User CC, CFLAGS, CPPFLAGS and LDFLAGS are always
# honoured; the project's own flags live in VOLLEY_* variables placed before them.
# SPDX-License-Identifier: MIT

VERSION = 0.2.0

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/volley
INSTALL ?= install
PYTHON  ?= python3

CFLAGS ?= -O2 -g

include deps/libs.mk

VOLLEY_CPPFLAGS = -Isrc -Ibuild -D_GNU_SOURCE -DVOLLEY_VERSION='"$(VERSION)"' \
                  $(LUA_CFLAGS) $(SSL_CFLAGS) $(EV_CFLAGS) $(NGHTTP2_CFLAGS) $(HTTP3_CPPFLAGS) \
                  $(SNAPPY_CPPFLAGS) $(URING_CFLAGS)
# The prefix map keeps the build directory out of the debug information, so
# the same sources give the same binary wherever they are built.
VOLLEY_CFLAGS   = -std=gnu11 -pthread -Wall -Wextra -ffile-prefix-map=$(CURDIR)=.
VOLLEY_LIBS     = $(LUA_LIBS) $(SSL_LIBS) $(EV_LIBS) $(NGHTTP2_LIBS) $(HTTP3_LIBS) $(SNAPPY_LIBS) \
                  $(URING_LIBS) -lm -pthread

# QUIC and HTTP/3 (src/quic*.c, its datagrams in src/udp.c, src/h3*.c and
# their unit tests) are built only with their libraries (HTTP3 in deps/libs.mk).
HTTP3_ONLY = $(if $(filter 1,$(HTTP3)),,src/quic%.c src/udp.c src/h3%.c tests/unit/test_quic%.c \
                                          tests/unit/test_h3%.c)
SRCS     := $(filter-out $(HTTP3_ONLY),$(sort $(wildcard src/*.c)))
OBJS     := $(SRCS:src/%.c=build/%.o)
LIB_OBJS := $(filter-out build/main.o,$(OBJS))

UNIT_SRCS := $(filter-out $(HTTP3_ONLY),$(sort $(wildcard tests/unit/test_*.c)))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=build/tests/%)
TESTD     := build/tests/volley-testd
NO_URING  := build/tests/no-uring

.PHONY: all check check-big check-kube test tests bench demo clean distclean
.DELETE_ON_ERROR:

all: volley build/volley.1 build/volley-sweep.1 build/volley-plot.1 build/volley-kube.1 \
     build/volley-report.1

volley: build/main.o build/libvolley.a
	$(CC) $(VOLLEY_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ build/main.o build/libvolley.a $(VOLLEY_LIBS)

build/libvolley.a: $(LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $(LIB_OBJS)

# The Lua half of the scripting API, as a C string (no luajit -b needed).
build/wrk_lua.h: src/wrk.lua | build
	{ echo 'static const char wrk_lua[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; } > $@

build/script.o: build/wrk_lua.h

build/%.o: src/%.c | build
	$(CC) $(VOLLEY_CPPFLAGS) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

build build/tests:
	mkdir -p $@

build/tests/test_%: tests/unit/test_%.c tests/unit/unit.h build/libvolley.a | build/tests
	$(CC) $(VOLLEY_CPPFLAGS) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< build/libvolley.a $(VOLLEY_LIBS)

$(TESTD): tests/server/testd.c | build/tests
	$(CC) -D_GNU_SOURCE $(EV_CFLAGS) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(EV_LIBS) -lm

$(NO_URING): tests/server/no_uring.c | build/tests
	$(CC) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<

include tests/fuzz/fuzz.mk tests/sanitize.mk tests/lint.mk

tests: volley $(UNIT_BINS) $(REPLAY_BINS) $(TESTD) $(NO_URING)

# SANITIZE=1: the same suite against the sanitizer build (tests/sanitize.mk).
# ENGINE=epoll or ENGINE=io_uring: every run of the suite on that engine (by
# default, the one volley picks: io_uring for http URLs where the kernel
# allows it); tests/conftest.py.
export VOLLEY_TEST_ENGINE := $(ENGINE)
ifeq ($(SANITIZE),1)
check test: check-asan
else
check test: tests
	$(PYTHON) tests/run.py
endif

# volley-kube and the shipped manifest on a real one-node Kubernetes cluster
# that the test builds (cached in /var/cache/volley-check-kube), starts on
# 127.0.0.1 and tears down: needs root (tests/kube/cluster.py).
check-kube: all
	$(PYTHON) tests/run.py tests/kube/check_kube.py

# 150,000 connections to one nginx port from four source addresses (--bind),
# which one address cannot hold, and the memory each costs volley, nginx and
# the kernel (tests/big/check_big.py): too heavy for make check, run by hand.
# The figures go to build/big/figures.txt.
check-big: all
	$(PYTHON) tests/run.py -s tests/big/check_big.py

# A short benchmark against the in-tree test server, to see the report.
demo: volley $(TESTD)
	tests/demo.sh

# volley side by side with wrk (needs wrk and nginx: deps/install.sh --test).
# Prints a table; never fails on a number. BENCH_RUNS, BENCH_DURATION and
# BENCH_ROWS tune it (see tests/bench/bench.py).
bench: volley $(TESTD)
	$(PYTHON) tests/bench/bench.py

clean:
	rm -rf build volley volley-static

distclean: clean
	rm -f volley-*.tar.gz

# ---------------------------------------------------------------------------
# Installing and distributing
# ---------------------------------------------------------------------------

.PHONY: install uninstall dist distcheck static deb rpm pkg-sums

MAN1DIR ?= $(MANDIR)/man1
DOCS     = $(wildcard README.md SCRIPTING.md docs/*.md)
EXAMPLES = $(wildcard scripts/*.lua)
TOOLS    = $(wildcard scripts/volley-sweep scripts/volley-plot scripts/volley-kube \
                     scripts/volley-report)
TOOL_MANS = build/volley-sweep.1 build/volley-plot.1 build/volley-kube.1 build/volley-report.1

build/%.1: docs/%.1 Makefile | build
	sed 's/@VERSION@/$(VERSION)/g' $< > $@

# Never strips: packagers split debug information themselves.
install: volley build/volley.1 $(TOOL_MANS)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MAN1DIR) $(DESTDIR)$(DOCDIR)
	$(INSTALL) -m 755 volley $(TOOLS) $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 644 build/volley.1 $(TOOL_MANS) $(DESTDIR)$(MAN1DIR)/
	$(if $(DOCS),$(INSTALL) -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/)
	$(if $(EXAMPLES),$(INSTALL) -d $(DESTDIR)$(DOCDIR)/scripts)
	$(if $(EXAMPLES),$(INSTALL) -m 644 $(EXAMPLES) $(DESTDIR)$(DOCDIR)/scripts/)

# Removes exactly what install put there; directories only when empty.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/volley $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOLS))) \
	      $(DESTDIR)$(MAN1DIR)/volley.1 $(addprefix $(DESTDIR)$(MAN1DIR)/,$(notdir $(TOOL_MANS))) \
	      $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS))) \
	      $(addprefix $(DESTDIR)$(DOCDIR)/scripts/,$(notdir $(EXAMPLES)))
	rmdir $(DESTDIR)$(DOCDIR)/scripts $(DESTDIR)$(DOCDIR) 2>/dev/null || true

# volley-X.Y.Z.tar.gz: the files git tracks (or, in an unpacked tarball, the
# files its MANIFEST lists), with a fixed date, owner and order, so the same
# sources give the same tarball.
DIST       = volley-$(VERSION)
DIST_EPOCH = $(or $(SOURCE_DATE_EPOCH),$(if $(wildcard .git),$(shell git log -1 --format=%ct)),\
                  $(shell date -r MANIFEST +%s 2>/dev/null),0)

dist:
	rm -rf build/dist
	mkdir -p build/dist/$(DIST)
	{ if [ -e .git ]; then git ls-files; else cat MANIFEST; fi; echo MANIFEST; } \
	    | LC_ALL=C sort -u > build/dist/MANIFEST
	grep -vx MANIFEST build/dist/MANIFEST | tar -cf - -T - | tar -xf - -C build/dist/$(DIST)
	cp build/dist/MANIFEST build/dist/$(DIST)/
	tar -C build/dist --sort=name --mtime=@$(DIST_EPOCH) --owner=0 --group=0 --numeric-owner \
	    --mode=u+rw,go=rX -cf - $(DIST) | gzip -9n > $(DIST).tar.gz

# What a release needs: the tarball builds and passes the whole suite with no
# .git, installs and uninstalls cleanly, and makes the same tarball again.
distcheck: dist
	rm -rf build/distcheck
	mkdir -p build/distcheck
	gzip -dc $(DIST).tar.gz | tar -xf - -C build/distcheck
	$(MAKE) -C build/distcheck/$(DIST) check
	$(MAKE) -C build/distcheck/$(DIST) install DESTDIR=$(CURDIR)/build/distcheck/root
	$(MAKE) -C build/distcheck/$(DIST) uninstall DESTDIR=$(CURDIR)/build/distcheck/root
	test -z "$$(find build/distcheck/root -type f)"
	$(MAKE) -C build/distcheck/$(DIST) dist
	cmp $(DIST).tar.gz build/distcheck/$(DIST)/$(DIST).tar.gz

# volley-static: LuaJIT, OpenSSL, libev, libnghttp2, ngtcp2, nghttp3 and liburing
# linked in from their .a files, for a load-generator box that lacks them. The C library
# stays shared: glibc's getaddrinfo() and dlopen() (LuaJIT's ffi.load,
# OpenSSL's providers) load parts of the same glibc at run time anyway; so
# does GnuTLS (HTTP/3's handshake), which every Debian and Ubuntu system has
# (apt depends on it) and whose p11-kit has no static library. With musl, a
# fully static binary:
#   make static STATIC_LDFLAGS=-static \
#        STATIC_LIBS='$(LUA_LIBS) $(SSL_LIBS) $(EV_LIBS) $(NGHTTP2_LIBS) $(HTTP3_LIBS) \
#                     $(URING_LIBS) -lm'
STATIC_LDFLAGS ?= -static-libgcc
STATIC_LIBS    ?= -Wl,-Bstatic $(LUA_LIBS) $(SSL_LIBS) $(EV_LIBS) $(NGHTTP2_LIBS) $(NGTCP2_LIBS) \
                  $(NGHTTP3_LIBS) $(SNAPPY_LIBS) $(if $(SNAPPY_LIBS),-lstdc++) $(URING_LIBS) \
                  -Wl,-Bdynamic $(GNUTLS_LIBS) -lm -ldl -pthread

static: volley-static

volley-static: build/main.o build/libvolley.a
	$(CC) $(VOLLEY_CFLAGS) $(CFLAGS) $(STATIC_LDFLAGS) $(LDFLAGS) -o $@ build/main.o build/libvolley.a $(STATIC_LIBS)

# The Debian source and binary packages, built from the release tarball as a
# distribution builds them: the tarball becomes the .orig.tar.gz, the tree's
# packaging/debian/ its debian/ directory. The results land in build/deb/ and
# lintian must find no error and no warning in them. The outer make's flags
# and command-line variables stay out: the package uses dpkg-buildflags'.
# DEB_BUILD_OPTIONS=nocheck skips the build-time tests (see debian/rules).
DEB_VERSION = $(shell dpkg-parsechangelog -l packaging/debian/changelog -S Version 2>/dev/null)

deb: dist
	rm -rf build/deb
	mkdir -p build/deb
	cp $(DIST).tar.gz build/deb/volley_$(VERSION).orig.tar.gz
	tar -xzf $(DIST).tar.gz -C build/deb
	cp -R packaging/debian build/deb/$(DIST)/debian
	cd build/deb/$(DIST) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
	    dpkg-buildpackage -us -uc -jauto
	lintian --fail-on error,warning --info --display-info \
	    build/deb/volley_$(DEB_VERSION)_$$(dpkg-architecture -qDEB_HOST_ARCH).changes

# The RPM source and binary packages from the release tarball, into
# build/rpm/. RPMBUILD_FLAGS: e.g. --nodeps where the build dependencies come
# from another package manager, --nocheck to leave out %check.
RPMBUILD_FLAGS ?=

rpm: dist
	rm -rf build/rpm
	mkdir -p build/rpm/SOURCES
	cp $(DIST).tar.gz build/rpm/SOURCES/
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
	    rpmbuild -ba $(RPMBUILD_FLAGS) --define '_topdir $(CURDIR)/build/rpm' packaging/rpm/volley.spec

# The Arch, Alpine and Homebrew files name the release tarball with its
# checksum. A tarball cannot hold its own checksum, so these are written when
# a release is made: make pkg-sums on the release commit, after make dist.
pkg-sums: dist
	sha256=$$(sha256sum $(DIST).tar.gz | cut -d' ' -f1); \
	sha512=$$(sha512sum $(DIST).tar.gz | cut -d' ' -f1); \
	sed -i "s/^sha256sums=.*/sha256sums=('$$sha256')/" packaging/arch/PKGBUILD && \
	sed -i "s/^  sha256 \".*\"$$/  sha256 \"$$sha256\"/" packaging/homebrew/volley.rb && \
	sed -i "s/^[0-9a-f]*  volley-.*\.tar\.gz$$/$$sha512  $(DIST).tar.gz/" packaging/alpine/APKBUILD

-include $(OBJS:.o=.d)
