/* Fuzz target for the request checker (src/http.c http_request_parse, and
 * request_set in src/request.c that wraps it): what a script's request()
 * returns. A refusal must say where ("<what> at <line>:<column>" inside the
 * input); an accepted batch must split into its requests consistently: the
 * prefix holding the first i requests parses as exactly i requests, HEAD
 * flags match the methods, and only empty lines may follow the last one.
 * SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "http.h"
#include "http_request.h"
#include "request.h"

static void check_refusal(const uint8_t *data, size_t size, const char *err)
{
    size_t lines = 1, line, column;
    int end = 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    const char *at = strstr(err, " at ");
    FUZZ_CHECK(at && at > err);
    FUZZ_CHECK(sscanf(at, " at %zu:%zu%n", &line, &column, &end) == 2 && at[end] == '\0');
    FUZZ_CHECK(line >= 1 && line <= lines && column >= 1 && column <= size + 1);
}

static void check_batch(const uint8_t *data, size_t size, size_t n)
{
    const char *buf = (const char *)data;
    char err[128];
    bool *heads = calloc(n, sizeof *heads);
    FUZZ_CHECK(heads);
    FUZZ_CHECK(http_request_parse(buf, size, heads, n, err, sizeof err) == n && !err[0]);
    size_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        size_t start = http_request_prefix(buf, size, i);
        FUZZ_CHECK(start >= prev && start < size);
        if (i > 0)
            FUZZ_CHECK(start > prev && http_request_parse(buf, start, NULL, 0, NULL, 0) == i);
        prev = start;
        while (start < size && (buf[start] == '\n' ||
                                (buf[start] == '\r' && start + 1 < size && buf[start + 1] == '\n')))
            start += buf[start] == '\r' ? 2 : 1;
        FUZZ_CHECK(heads[i] == (size - start >= 5 && memcmp(buf + start, "HEAD ", 5) == 0));
    }
    size_t end = http_request_prefix(buf, size, n);
    FUZZ_CHECK(end > prev && end <= size);
    FUZZ_CHECK(http_request_parse(buf, end, NULL, 0, NULL, 0) == n);
    for (size_t i = end; i < size; i++)
        FUZZ_CHECK(buf[i] == '\n' || (buf[i] == '\r' && i + 1 < size && buf[i + 1] == '\n'));
    free(heads);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[128];
    memset(err, 'x', sizeof err);
    size_t n = http_request_parse((const char *)data, size, NULL, 0, err, sizeof err);
    FUZZ_CHECK(memchr(err, '\0', sizeof err));
    if (n == 0)
        check_refusal(data, size, err);
    else
        check_batch(data, size, n);

    /* request_set, as a script's request is kept: it owns a NUL-ended copy. */
    struct request r = {0};
    char *copy = malloc(size + 1);
    FUZZ_CHECK(copy);
    memcpy(copy, data, size);
    copy[size] = '\0';
    bool ok = request_set(&r, copy, size, err, sizeof err);
    FUZZ_CHECK(ok == (n > 0));
    if (ok) {
        FUZZ_CHECK(r.depth == n && r.len == size && r.data[size] == '\0');
        FUZZ_CHECK(request_prefix(&r, n) == size);
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(request_prefix(&r, i) == http_request_prefix(r.data, size, i));
    }
    request_free(&r);
    return 0;
}
