/* HTTP/2 requests made from the HTTP/1.1 request bytes volley sends (the
 * static request, or what a request() hook returned): per request, the header
 * list nghttp2_submit_request takes and the body bytes, built once per batch
 * so that submitting a stream costs no parsing.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_H2REQ_H
#define VOLLEY_H2REQ_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>

#include "request.h"

/* One request of the batch. nv holds :method, :scheme, :authority and :path,
 * then the other fields in their order with lower-case names; every entry has
 * NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE, so the batch's
 * bytes and this h2req must outlive the HEADERS frame (and body the DATA). */
struct h2req_msg {
    nghttp2_nv *nv;
    size_t nvlen;
    const char *body; /* body_len bytes for DATA frames; NULL when body_len is 0 */
    size_t body_len;  /* 0: END_STREAM on the HEADERS frame */
    bool head;        /* a HEAD request: its response has no body */
};

/* The largest request header block volley has nghttp2 send (nghttp2's
 * default), as nghttp2_hd_deflate_bound() measures it. */
#define H2REQ_BLOCK_MAX (64 * 1024)

struct h2req {
    struct h2req_msg *msgs; /* count of them, in the batch's order */
    size_t count;
    /* Private: the storage msgs point into, reused by the next build. */
    nghttp2_nv *_nv;
    char *_copy;
    size_t _msgs_cap, _nv_cap, _copy_cap;
};

/* Converts the batch r (bytes request_set accepted) for a connection whose
 * scheme is https (tls) or http, replacing what h held. The header lists point
 * into r->data where they can: only names with capitals, the bodies of chunked
 * requests and rewritten values are copied. On a request HTTP/2 cannot carry,
 * returns false with a one-line reason in err ("request 2 of 3: ..." in a
 * batch of several) and leaves h empty. */
bool h2req_build(struct h2req *h, const struct request *r, bool tls, char *err, size_t err_len);
/* The same for a protocol of that name ("HTTP/3", whose header lists are
 * HTTP/2's), which the messages in err name. */
bool h2req_build_for(struct h2req *h, const struct request *r, bool tls, const char *proto,
                     char *err, size_t err_len);

/* Whether nghttp2 will send each request of h: false, with a one-line reason
 * in err, when a header block is over H2REQ_BLOCK_MAX. */
bool h2req_fits(const struct h2req *h, char *err, size_t err_len);

void h2req_free(struct h2req *h);

/* The static request's conversion, made once for the whole run. */
struct h2req_static {
    const struct request *req;
    const char *data;
    size_t len;
    struct h2req conv;
};

/* s's conversion of r, made again only when r is another request. Exits
 * with a one-line message when proto cannot carry it. */
const struct h2req *h2req_static(struct h2req_static *s, const struct request *r, bool tls,
                                 const char *proto);
void h2req_static_free(struct h2req_static *s);

/* A batch request() returned, copied and converted: HTTP/2 and HTTP/3 keep
 * its requests in flight while the connection's own buffer is refilled by
 * the next batch. */
struct h2req_batch {
    struct request req;
    struct h2req conv;
    bool valid; /* conv is the conversion of req */
};

/* Makes b the conversion of r, unless it holds the same bytes already (most
 * scripts return the same few requests); returns whether it converted.
 * Exits with a one-line message naming proto when r is malformed, holds
 * another number of requests than request()'s first call, or cannot be
 * carried. */
bool h2req_batch_set(struct h2req_batch *b, const struct request *r, bool tls, const char *proto);
void h2req_batch_free(struct h2req_batch *b);

#endif
