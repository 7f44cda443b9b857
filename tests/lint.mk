# Checking the sources the way CI does (included by the Makefile).
#   make lint     C formatting (clang-format), C static analysis (cppcheck),
#                 shell scripts (shellcheck) and Python (pyflakes); fails on
#                 any finding. deps/install.sh --test installs the four tools.
#   make format   rewrite the C sources in the .clang-format style.
# A false positive is silenced where it occurs, with a comment saying why:
# /* cppcheck-suppress ID */, # shellcheck disable=SCnnnn, # noqa for pyflakes.
# SPDX-License-Identifier: MIT

CLANG_FORMAT ?= clang-format
CPPCHECK     ?= cppcheck
SHELLCHECK   ?= shellcheck
PYFLAKES     ?= $(if $(shell command -v pyflakes3),pyflakes3,pyflakes)

LINT_C = $(wildcard src/*.[ch] tests/unit/*.[ch] tests/fuzz/*.[ch] tests/server/*.[ch])
# Scripts are found by their first line as well as by their suffix, so that
# one without a suffix (.ci/run, scripts/volley-sweep) is checked too.
lint_first_line = $(shell find .ci deps packaging scripts tests -name __pycache__ -prune -o -type f \
                    -exec awk 'FNR == 1 && /^#!.*$(1)/ { print FILENAME }' {} + 2>/dev/null)
LINT_SH = $(sort $(wildcard deps/*.sh scripts/*.sh tests/*.sh tests/*/*.sh) \
                 $(call lint_first_line,[/ ](ba|da)?sh( |$$)))
LINT_PY = $(sort $(wildcard scripts/*.py tests/*.py tests/*/*.py) \
                 $(call lint_first_line,[/ ]python3?( |$$)))

# cppcheck's errors (null dereferences, leaks, reads out of bounds) are always
# on; of its optional groups these are the ones worth a finding here:
#   warning      code that is usually a bug: format strings that do not match
#                their arguments, unchecked results, suspicious sizeof
#   style        stores never read, conditions always true or false, identical
#                branches, names that shadow others
#   performance  needless copies of large structs
#   portability  code that relies on the size of int, long or pointers
#   --library=posix  the POSIX calls' contracts (descriptors leaked, ...)
# variableScope (a variable that could be declared in an inner block) is left
# to the author. -D_GNU_SOURCE -DVOLLEY_URING and the machine's own __ARCH__
# (which the compiler defines and cppcheck does not) check the one
# configuration the build compiles (with the io_uring engine), not every
# combination of #ifdefs.
# The build directory keeps results between runs, so a second make lint checks
# only the files that changed.
CPPCHECK_FLAGS = --enable=warning,style,performance,portability --library=posix \
                 --suppress=variableScope --std=c11 -D_GNU_SOURCE -DVOLLEY_URING \
                 -D__$(shell uname -m)__ -Isrc \
                 --inline-suppr --error-exitcode=1 -q

.PHONY: lint lint-format lint-sh lint-py lint-cppcheck format

# The fast checks first, so that a finding there is reported at once.
lint: lint-format lint-sh lint-py lint-cppcheck

lint-format:
	$(CLANG_FORMAT) --dry-run -Werror $(LINT_C)

lint-sh:
	$(SHELLCHECK) $(LINT_SH)

lint-py:
	$(PYFLAKES) $(LINT_PY)

lint-cppcheck:
	mkdir -p build/cppcheck
	$(CPPCHECK) $(CPPCHECK_FLAGS) --cppcheck-build-dir=build/cppcheck $(filter %.c,$(LINT_C))

format:
	$(CLANG_FORMAT) -i $(LINT_C)
