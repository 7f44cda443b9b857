# The sanitizer build (included by the Makefile): volley, the unit tests, the
# fuzz replays and volley-testd built with AddressSanitizer (leak checking on)
# and UndefinedBehaviorSanitizer into build/asan/, beside the normal build,
# and the whole suite run against them. tests/conftest.py sets the sanitizer
# options and fails a test on any sanitizer report.
#   make check-asan    (or: make check SANITIZE=1)
# SPDX-License-Identifier: MIT

ASAN_DIR   = build/asan
ASAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
ASAN_OBJS  = $(SRCS:src/%.c=$(ASAN_DIR)/%.o)
ASAN_LIB   = $(ASAN_DIR)/libvolley.a
ASAN_TESTS = $(ASAN_DIR)/volley $(UNIT_BINS:build/%=$(ASAN_DIR)/%) \
             $(REPLAY_BINS:build/%=$(ASAN_DIR)/%) $(ASAN_DIR)/tests/volley-testd

.PHONY: tests-asan check-asan

$(ASAN_DIR) $(ASAN_DIR)/tests:
	mkdir -p $@

$(ASAN_DIR)/%.o: src/%.c | $(ASAN_DIR)
	$(CC) $(VOLLEY_CPPFLAGS) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -c -o $@ $<

$(ASAN_DIR)/script.o: build/wrk_lua.h

$(ASAN_LIB): $(filter-out $(ASAN_DIR)/main.o,$(ASAN_OBJS))
	rm -f $@
	$(AR) rcs $@ $^

$(ASAN_DIR)/volley: $(ASAN_DIR)/main.o $(ASAN_LIB)
	$(CC) $(VOLLEY_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) $(LDFLAGS) -o $@ $^ $(VOLLEY_LIBS)

$(ASAN_DIR)/tests/test_%: tests/unit/test_%.c tests/unit/unit.h $(ASAN_LIB) | $(ASAN_DIR)/tests
	$(CC) $(VOLLEY_CPPFLAGS) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) $(LDFLAGS) \
	    -o $@ $< $(ASAN_LIB) $(VOLLEY_LIBS)

$(ASAN_DIR)/tests/fuzz_%-replay: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(ASAN_LIB) | $(ASAN_DIR)/tests
	$(CC) $(VOLLEY_CPPFLAGS) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) $(LDFLAGS) \
	    -o $@ $< tests/fuzz/replay.c $(ASAN_LIB) $(VOLLEY_LIBS)

$(ASAN_DIR)/tests/volley-testd: tests/server/testd.c | $(ASAN_DIR)/tests
	$(CC) -D_GNU_SOURCE $(EV_CFLAGS) $(CPPFLAGS) $(VOLLEY_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) \
	    $(LDFLAGS) -o $@ $< $(EV_LIBS) -lm

tests-asan: $(ASAN_TESTS) $(NO_URING)

check-asan: tests-asan
	VOLLEY_BUILD=$(ASAN_DIR) VOLLEY_SANITIZED=1 $(PYTHON) tests/run.py

-include $(ASAN_OBJS:.o=.d)
