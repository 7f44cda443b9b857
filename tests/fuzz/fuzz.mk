# Fuzzing the parsers of untrusted input (included by the Makefile).
#   make fuzz               build the libFuzzer targets (clang) and run each for
#                           FUZZ_TIME seconds from its seed corpus
#   make fuzz-response ...  build and run one target
# New inputs go to build/fuzz/corpus/<target>/, crash inputs to
# build/fuzz/<target>-crash-*; a crash input is kept as a regression test by
# copying it to tests/fuzz/regressions/<target>/. `make tests` builds the same
# targets without libFuzzer (build/tests/fuzz_<target>-replay), which
# `make check` runs over the seed corpus and the regressions.
# SPDX-License-Identifier: MIT

FUZZ_TARGETS  = response url units request h2req jdoc hdr h2 tunnel
FUZZ_TIME    ?= 60
FUZZ_CC      ?= clang
FUZZ_FLAGS   ?= -g -O1 -fno-omit-frame-pointer
FUZZ_SANITIZE = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
# What the targets exercise: the parsers and what they need; of the system
# libraries only libnghttp2 (its header checks, for the HTTP/2 conversion).
FUZZ_SRCS     = src/http.c src/http_request.c src/url.c src/units.c src/request.c src/h2req.c src/buf.c src/xalloc.c \
                src/jdoc.c src/hist.c src/threshold.c src/stats.c src/json.c
FUZZ_BINS     = $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)
REPLAY_BINS   = $(FUZZ_TARGETS:%=build/tests/fuzz_%-replay)

.PHONY: fuzz fuzz-build $(FUZZ_TARGETS:%=fuzz-%)

fuzz-build: $(FUZZ_BINS)

build/fuzz:
	mkdir -p $@

# The HTTP/2 session's target plays the connection, through the session's sink
# (tests/fuzz/fuzz_h2.c).
build/fuzz/fuzz_h2: FUZZ_EXTRA = src/h2.c src/pool.c
# A proxy's answers, through a socket pair (tests/fuzz/fuzz_tunnel.c).
build/fuzz/fuzz_tunnel: FUZZ_EXTRA = src/tunnel.c src/net.c

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_SRCS) $(wildcard src/*.h) | build/fuzz
	$(FUZZ_CC) -Isrc -D_GNU_SOURCE -std=gnu11 -Wall -Wextra $(NGHTTP2_CFLAGS) $(EV_CFLAGS) \
	    $(FUZZ_FLAGS) $(FUZZ_SANITIZE) -o $@ $< $(FUZZ_SRCS) $(FUZZ_EXTRA) $(NGHTTP2_LIBS)

# Each run starts from the seeds and what earlier runs found; -print_final_stats
# shows the number of executions.
$(FUZZ_TARGETS:%=fuzz-%): fuzz-%: build/fuzz/fuzz_%
	mkdir -p build/fuzz/corpus/$*
	$< -max_total_time=$(FUZZ_TIME) -print_final_stats=1 -artifact_prefix=build/fuzz/$*- \
	    build/fuzz/corpus/$* tests/fuzz/corpus/$*

fuzz: $(FUZZ_TARGETS:%=fuzz-%)

build/tests/fuzz_%-replay: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h build/libvolley.a | build/tests
	$(CC) $(VOLLEY_CPPFLAGS) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ \
	    $< tests/fuzz/replay.c build/libvolley.a $(VOLLEY_LIBS)
