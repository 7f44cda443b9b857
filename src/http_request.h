/* The request bytes a script produces, checked as wrk checks them, and read
 * back one request at a time.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_HTTP_REQUEST_H
#define VOLLEY_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

/* Parse the bytes of one or more pipelined requests (what a script's request()
 * returned). Returns the number of complete requests; heads[i] (if heads is not
 * NULL, for i < heads_len) tells whether request i is a HEAD request. Returns 0
 * and writes "<what> at <line>:<column>" (wrk's wording, 1-based) into err when
 * the bytes are malformed, hold no complete request, or end with an incomplete
 * one. */
size_t http_request_parse(const char *buf, size_t len, bool *heads, size_t heads_len, char *err,
                          size_t err_len);
/* The length of the first n requests of bytes http_request_parse accepted. */
size_t http_request_prefix(const char *buf, size_t len, size_t n);

/* One request of bytes http_request_parse accepted, as slices of them. */
struct http_request_info {
    const char *method, *target;
    size_t method_len, target_len;
    const char *fields; /* the field lines (read them with http_field_next) */
    size_t fields_len;
    const char *body; /* the message body as framed: with chunked, the chunked coding */
    size_t body_len;
    bool chunked; /* Transfer-Encoding: chunked (else Content-Length or no body) */
};

/* The request that starts at *pos (0 for the first) in bytes http_request_parse
 * accepted: fills *info and moves *pos past it. False after the last one. */
bool http_request_next(const char *buf, size_t len, size_t *pos, struct http_request_info *info);

/* The data of a chunked request body (info->chunked) without its framing:
 * copied to out (info->body_len bytes are always enough) unless out is NULL.
 * Returns its length; *trailers tells whether trailer fields follow it. */
size_t http_request_dechunk(const struct http_request_info *info, char *out, bool *trailers);

#endif
