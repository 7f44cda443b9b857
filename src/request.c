/* Building request bytes the way wrk.format() does, and turning bytes into
 * a batch (the verification wrk runs on what request() returns).
 * SPDX-License-Identifier: MIT */
#include "request.h"

#include <stdlib.h>
#include <string.h>

#include "http_request.h"
#include "xalloc.h"

char *request_format(const char *method, const char *path, const struct header *headers,
                     size_t nheaders, const char *body, size_t body_len, size_t *len)
{
    size_t size = strlen(method) + strlen(path) + sizeof " HTTP/1.1\r\n\r\n" + body_len;
    for (size_t i = 0; i < nheaders; i++)
        size += strlen(headers[i].name) + strlen(headers[i].value) + 4;
    char *buf = xmalloc(size + 1), *p = buf;
    p = stpcpy(stpcpy(stpcpy(stpcpy(p, method), " "), path), " HTTP/1.1\r\n");
    for (size_t i = 0; i < nheaders; i++)
        p = stpcpy(stpcpy(stpcpy(stpcpy(p, headers[i].name), ": "), headers[i].value), "\r\n");
    p = stpcpy(p, "\r\n");
    if (body_len)
        memcpy(p, body, body_len);
    p += body_len;
    *p = '\0';
    *len = (size_t)(p - buf);
    return buf;
}

bool request_set(struct request *r, char *data, size_t len, char *err, size_t err_len)
{
    size_t n = http_request_parse(data, len, NULL, 0, err, err_len);
    if (n == 0) {
        free(data);
        return false;
    }
    request_free(r);
    r->data = data;
    r->len = len;
    r->cap = len + 1;
    r->depth = n;
    /* Finding HEAD requests needs a second pass only when one may be there. */
    if (request_may_have_head(r)) {
        r->heads = xcalloc(n, sizeof *r->heads);
        http_request_parse(data, len, r->heads, n, err, err_len);
    }
    return true;
}

void request_repeat(struct request *r, size_t n)
{
    char *data = xmalloc(r->len * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(data + i * r->len, r->data, r->len);
    data[r->len * n] = '\0';
    if (r->heads) {
        bool *heads = xmalloc(r->depth * n * sizeof *heads);
        for (size_t i = 0; i < n; i++)
            memcpy(heads + i * r->depth, r->heads, r->depth * sizeof *heads);
        free(r->heads);
        r->heads = heads;
    }
    free(r->data);
    r->data = data;
    r->len *= n;
    r->cap = r->len + 1;
    r->depth *= n;
}

bool request_may_have_head(const struct request *r)
{
    /* One request: its method comes first (after empty lines, which the
     * request check skips). A dynamic script's request() is checked this way
     * on every batch, so the common case does not scan the whole request. */
    if (r->depth == 1) {
        const char *method = r->data + strspn(r->data, "\r\n"); /* data ends with a NUL */
        return strncmp(method, "HEAD ", 5) == 0;
    }
    return memmem(r->data, r->len, "HEAD", 4) != NULL;
}

size_t request_prefix(const struct request *r, size_t n)
{
    return n >= r->depth ? r->len : http_request_prefix(r->data, r->len, n);
}

struct request request_copy(const struct request *r)
{
    struct request copy = *r;
    copy.data = xmalloc(r->len + 1);
    memcpy(copy.data, r->data, r->len + 1);
    copy.cap = r->len + 1;
    if (r->heads) {
        copy.heads = xmalloc(r->depth * sizeof *r->heads);
        memcpy(copy.heads, r->heads, r->depth * sizeof *r->heads);
    }
    return copy;
}

void request_free(struct request *r)
{
    free(r->data);
    free(r->heads);
    memset(r, 0, sizeof *r);
}
