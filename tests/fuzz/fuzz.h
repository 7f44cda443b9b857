/* What the fuzz targets share: the libFuzzer entry point they define, and a
 * check that stops on a broken invariant (libFuzzer then saves the input).
 * The same targets build without libFuzzer, linked with replay.c, to run the
 * seed corpus and every saved crash input as regression tests.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_FUZZ_H
#define VOLLEY_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
