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

struct request;

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

/* Whether nghttp2 will send each request of h: false, with a one-line reason
 * in err, when a header block is over H2REQ_BLOCK_MAX. */
bool h2req_fits(const struct h2req *h, char *err, size_t err_len);

void h2req_free(struct h2req *h);

#endif
