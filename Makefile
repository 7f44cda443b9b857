# volley: a Lua-scriptable HTTP benchmarking tool.
# GNU make, no configure step. User CC, CFLAGS, CPPFLAGS and LDFLAGS are always
# honoured; the project's own flags live in VOLLEY_* variables placed before them.
# SPDX-License-Identifier: MIT

VERSION = 0.1.0

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/volley
INSTALL ?= install
PYTHON  ?= python3

CFLAGS ?= -O2 -g

include deps/libs.mk

VOLLEY_CPPFLAGS = -Isrc -Ibuild -D_GNU_SOURCE -DVOLLEY_VERSION='"$(VERSION)"' \
                  $(LUA_CFLAGS) $(SSL_CFLAGS) $(EV_CFLAGS)
VOLLEY_CFLAGS   = -std=gnu11 -pthread -Wall -Wextra
VOLLEY_LIBS     = $(LUA_LIBS) $(SSL_LIBS) $(EV_LIBS) -lm -pthread

SRCS     := $(sort $(wildcard src/*.c))
OBJS     := $(SRCS:src/%.c=build/%.o)
LIB_OBJS := $(filter-out build/main.o,$(OBJS))

UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=build/tests/%)
TESTD     := build/tests/volley-testd

.PHONY: all check test tests demo clean distclean
.DELETE_ON_ERROR:

all: volley

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

include tests/fuzz/fuzz.mk tests/sanitize.mk

tests: volley $(UNIT_BINS) $(REPLAY_BINS) $(TESTD)

# SANITIZE=1: the same suite against the sanitizer build (tests/sanitize.mk).
ifeq ($(SANITIZE),1)
check test: check-asan
else
check test: tests
	$(PYTHON) tests/run.py
endif

# A short benchmark against the in-tree test server, to see the report.
demo: volley $(TESTD)
	tests/demo.sh

clean:
	rm -rf build volley

distclean: clean

-include $(OBJS:.o=.d)
