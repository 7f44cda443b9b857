/* HTTP/1.1 message framing written for volley (RFC 9112): finds where each
 * response ends in a byte stream that arrives in arbitrary pieces, reports its
 * status and whether the connection may be reused, and skips bodies without
 * copying them unless a Lua response() hook wants them. (The request bytes a
 * script produces are checked by http_request.h.)
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_HTTP_H
#define VOLLEY_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* A larger response head (status line + header fields + blank line) is an error. */
#define HTTP_MAX_HEAD (80 * 1024)
/* The most of a body kept for a response() hook; the rest is skipped. */
#define HTTP_MAX_BODY (64 * 1024 * 1024)

enum http_result {
    HTTP_MORE,  /* all input consumed, the response is not complete yet */
    HTTP_DONE,  /* a final response completed; *used says where it ended */
    HTTP_ERROR, /* malformed or oversized: the connection must be dropped */
};

enum http_error {
    HTTP_ERR_NONE,
    HTTP_ERR_STATUS_LINE,    /* not "HTTP/x.y NNN ..." */
    HTTP_ERR_HEADER,         /* a malformed header field line */
    HTTP_ERR_HEAD_TOO_LARGE, /* head larger than HTTP_MAX_HEAD */
    HTTP_ERR_CONTENT_LENGTH, /* invalid or conflicting Content-Length */
    HTTP_ERR_CHUNK,          /* malformed chunked framing */
    HTTP_ERR_TRUNCATED,      /* EOF in the middle of a response */
};

/* The last final response head parsed through it, and what it said. Under
 * load the responses are mostly byte for byte the same head, and the same
 * bytes give the same fields, so one found here again is not parsed again.
 * Shared by the parsers of one thread (never across threads). */
#define HTTP_CACHE_HEAD 512
struct http_head_cache {
    size_t len; /* 0: empty */
    int status;
    bool version_10, has_te, chunked, has_length, bad_length, conn_close, conn_keep_alive;
    uint64_t length;
    char data[HTTP_CACHE_HEAD];
};

struct http_parser {
    /* Results, valid after HTTP_DONE. */
    int status;      /* final status code (1xx interim responses are skipped) */
    bool keep_alive; /* false: close the connection after this response */
    enum http_error error;
    /* Set by the caller to keep what a response() hook needs. */
    bool want_head, want_body;
    struct buf head; /* with want_head: the final response's head, status line to blank line */
    struct buf body; /* with want_body: its body, chunked coding removed (at most
                      * HTTP_MAX_BODY bytes of it) */
    struct http_head_cache *cache; /* set by the caller, or NULL */
    /* Private state. */
    int _state;
    bool _head_request, _started, _chunked, _close_delimited, _version_10;
    bool _has_te, _has_length, _bad_length; /* framing fields seen in this head */
    bool _conn_close, _conn_keep_alive;     /* Connection tokens seen in this head */
    int _last_field;     /* which field an obs-fold line continues (0: none yet) */
    bool _folded;        /* this head had obs-fold lines: not one to cache */
    uint64_t _remaining; /* body or chunk bytes left; the Content-Length while in the head */
    size_t _head_len;    /* bytes of the current head (or trailer section) so far */
    struct buf _carry;   /* an incomplete head or chunk-size line kept across reads */
};

void http_parser_init(struct http_parser *p);
void http_parser_free(struct http_parser *p);

/* Prepare for the next response; head_request: it answers a HEAD request,
 * so no body follows whatever the header fields say. */
void http_begin(struct http_parser *p, bool head_request);

/* Consume bytes of the current response from buf. On HTTP_DONE, *used is the
 * number of bytes that belonged to it (the rest starts the next response);
 * on HTTP_MORE, *used == len; on HTTP_ERROR, where the error was found.
 * Until the next http_begin(), further calls return the same result with
 * *used == 0. buf need not stay valid after the call. */
enum http_result http_parse(struct http_parser *p, const char *buf, size_t len, size_t *used);

/* The peer closed the connection. HTTP_DONE if that ended a close-delimited
 * body (a complete response), HTTP_MORE if no byte of the current response had
 * arrived (an idle close), HTTP_ERROR (HTTP_ERR_TRUNCATED) otherwise. */
enum http_result http_eof(struct http_parser *p);

/* Whether any byte of the current response has been consumed, counting the
 * bytes of skipped 1xx interim responses (a close after them is a truncation). */
bool http_started(const struct http_parser *p);

/* The field lines of a head kept with want_head: what follows its status
 * line (NULL and 0 for no head). */
void http_head_fields(const struct buf *head, const char **fields, size_t *len);
/* Iterate over field lines (no start line before them), up to a blank line or
 * len. *pos starts at 0. Names and values are not NUL-terminated; values have
 * surrounding whitespace removed. */
bool http_field_next(const char *fields, size_t len, size_t *pos, const char **name,
                     size_t *name_len, const char **value, size_t *value_len);
/* Whether a comma-separated field value (Connection, TE) lists token, compared
 * without regard to case. */
bool http_list_has(const char *value, size_t len, const char *token, size_t token_len);

const char *http_error_str(enum http_error e);

#endif
