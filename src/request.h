/* The bytes a connection writes for one batch: one request, or several
 * pipelined ones, with how many responses they call for and which of them
 * answer a HEAD (and so carry no body).
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_REQUEST_H
#define VOLLEY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

struct request {
    char *data;
    size_t len, cap;
    size_t depth; /* requests in the batch, >= 1 */
    bool *heads;  /* depth flags, or NULL when none is a HEAD request */
};

/* A header field: -H, wrk.headers. */
struct header {
    char *name;
    char *value;
};

/* wrk.format(): "<method> <path> HTTP/1.1\r\n", one line per header in the
 * order given, "\r\n", then the body. Returns a new string of *len bytes. */
char *request_format(const char *method, const char *path, const struct header *headers,
                     size_t nheaders, const char *body, size_t body_len, size_t *len);

/* Takes ownership of data (len bytes) and parses it: sets depth and heads.
 * On malformed bytes returns false with wrk's "<what> at <line>:<col>" in err. */
bool request_set(struct request *r, char *data, size_t len, char *err, size_t err_len);

/* Whether request i of the batch is a HEAD request. */
static inline bool request_is_head(const struct request *r, size_t i)
{
    return r->heads && i < r->depth && r->heads[i];
}

/* n copies of the batch, one after the other (a pipeline n times as deep). */
void request_repeat(struct request *r, size_t n);

/* Whether a request of the batch (data, NUL-terminated, len and depth set)
 * may be a HEAD request: false means none is. */
bool request_may_have_head(const struct request *r);

/* The bytes of the batch's first n requests. */
size_t request_prefix(const struct request *r, size_t n);

/* A copy of r (data NUL-terminated, as request_set keeps it), its own. */
struct request request_copy(const struct request *r);

void request_free(struct request *r);

#endif
