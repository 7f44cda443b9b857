/*
 * volley-testd: the HTTP/1.1 server volley's integration tests and benchmarks run against. It
 * owns request parsing, response shaping, misbehaviour ("hostile") modes and the record of what
 * it saw (stats JSON and request log), all in one single-threaded libev loop.
 *
 * SPDX-License-Identifier: MIT
 *
 * ===========================================================================================
 * REFERENCE FOR TEST AUTHORS
 * ===========================================================================================
 *
 * Start-up
 *   volley-testd [options]
 *   Once listening it prints exactly one line on stdout and flushes it:
 *     "port N"       for TCP listeners (N is the real port, also when 0 was asked for)
 *     "unix PATH"    for Unix socket listeners
 *   Usage errors and start-up failures print "volley-testd: what: why" on stderr and exit 1.
 *   SIGTERM / SIGINT: write the stats (if --stats), flush the log, exit 0.
 *   SIGUSR1: write the stats and flush the log, keep running.
 *
 * General options
 *   --listen ADDR        127.0.0.1:PORT, [::1]:PORT (any IPv4/IPv6 literal) or unix:/path.
 *                        PORT 0 = ephemeral. Default 127.0.0.1:0. A stale socket file at the
 *                        unix path is replaced, and removed again at exit.
 *   --stats FILE         stats JSON (below), written to FILE.tmp then renamed to FILE, on
 *                        SIGTERM/SIGINT/SIGUSR1, at --max-time and at die-after.
 *   --log FILE           appends one JSON object per line for every complete request:
 *                          {"conn": 1, "method": "GET", "target": "/x?y", "version": "HTTP/1.1",
 *                           "headers": [["Host", "a"], ...], "body": "..."}
 *                        conn counts accepted connections from 1; header names are as
 *                        received, in order, values without surrounding whitespace; the body
 *                        is de-chunked. Strings are JSON-escaped, bytes >= 0x80 as \u00XX (so
 *                        the body is latin-1: decode "\u00e9" as byte 0xe9). Bodies past 1 MiB
 *                        are cut and the object gets "body_truncated": true. Buffered; flushed
 *                        at exit and on SIGUSR1. Bad requests are not logged.
 *   --max-time SECONDS   exit 0 (writing the stats) after this long; default 600, so a
 *                        forgotten server never lingers. Fractions allowed.
 *
 * Response shaping (default: "HTTP/1.1 200 OK", Server, Content-Type: text/plain,
 * Content-Length, body, keep-alive)
 *   --body-size N        body length; default 12 ("Hello world\n"); longer bodies repeat that
 *                        text, shorter ones cut it. Suffixes k, m, g are binary (KiB...).
 *   --chunked            chunked body in pieces of --chunk-size N bytes (default 5); the first
 *                        chunk carries the extension ";volley=1", the header "Trailer:
 *                        X-Trailer" announces the trailer field "X-Trailer: end".
 *   --close-delimited    no Content-Length, no Transfer-Encoding: the body ends when the server
 *                        closes (RFC 9112 §6.3 rule 8). No Connection header is added.
 *   --connection-close   every response has "Connection: close" and the server closes after it.
 *   --http10             "HTTP/1.0 200 OK" with Content-Length and no Connection header, then
 *                        close (HTTP/1.0 default).
 *   --http10-keepalive   "HTTP/1.0 200 OK" with "Connection: keep-alive"; connection kept.
 *   --close-after N      the Nth response on each connection has "Connection: close" and the
 *                        server closes (like nginx keepalive_requests).
 *   --idle-close MS      close a connection idle (no partial request, nothing to send) for MS.
 *   --status CODE        every response has this status (200..599).
 *   --status-every N:CODE  every Nth final response rendered by the server (one global counter
 *                        over all connections: responses N, 2N, 3N...) gets CODE.
 *   --delay MS           each response is sent MS (fractions allowed) after its request was
 *                        read completely; pipelined responses stay in order.
 *   --freeze MS:PERIOD   in the last MS of every PERIOD ms (counted from start-up) no response
 *                        is started; those due go out when the window ends. A response already
 *                        being written is not interrupted.
 *   --stall-after MS     from MS after the first complete request on, no response is started:
 *                        a server that stops answering partway through a run (requests are
 *                        still read and counted).
 *   --shed N             load shedding: a request that arrives while N others (over all
 *                        connections) wait for their response is answered 503 at once, without
 *                        --delay; the others are answered as usual.
 *   --interim            before every final response: "HTTP/1.1 100 Continue" and
 *                        "HTTP/1.1 103 Early Hints" with a Link field (not to HTTP/1.0
 *                        requests, RFC 9110 §15.2).
 *   --never              read and count requests, never answer them.
 *   --rcvbuf N           SO_RCVBUF of the listening socket, inherited by accepted ones.
 *   --early              a request with a body is answered as soon as its head is read, before
 *                        its body (as servers answer 401 or 413); the body is then read and
 *                        discarded as usual and the connection kept (unless the response
 *                        closes it). Bytes sent where the next request must start that do not
 *                        parse as one are a bad request, so a client that wrote its next
 *                        request into the rest of a body shows up in bad_requests.
 *   --trickle-ms MS      byte interval for --hostile trickle (default 10).
 *   Rules that always apply:
 *   - Closing: a request with "Connection: close", or an HTTP/1.0 request without
 *     "Connection: keep-alive", gets "Connection: close" (HTTP/1.1 responses only) and the
 *     server closes after that response (as nginx does). An HTTP/1.0 request with keep-alive
 *     gets "Connection: keep-alive". Requests pipelined after a closing one are ignored.
 *     The server closes gracefully: shutdown(SHUT_WR), then it reads and discards until the
 *     client closes (at most 2 s), so the client never gets a RST that could eat the response.
 *   - HEAD gets the same header (Content-Length or Transfer-Encoding as the GET would have)
 *     and no body. Status 204 and 304 get no body and no framing header.
 *   - Routes (path without query): "/authenticate" adds "X-Token: volley-token-1";
 *     "/resource" answers 401 unless the request has "X-Token: volley-token-1". Status
 *     precedence: 401 from /resource, then --shed, then --status-every, then --status, then
 *     200.
 *   - "Expect: 100-continue" on a request with a body gets "HTTP/1.1 100 Continue" when
 *     nothing is queued ahead of it on the connection.
 *   - Pipelining: every complete request in what one read() returned is parsed, all their
 *     responses are appended to one output buffer and written with one write().
 *
 * Hostile modes, --hostile KIND (may be repeated to add die-after to another kind)
 *   garbage         each request is answered with "garbage\r\n\r\n" and binary junk; kept open.
 *   short-body      "Content-Length: 100" and 10 body bytes, then close.
 *   reset           after a complete request, close with SO_LINGER {1, 0}: the client gets RST.
 *   trickle         normal responses written one byte per write, one every --trickle-ms.
 *   huge-header     a 1 MiB "X-Huge" field, then Content-Length 12 and the body; streamed with
 *                   backpressure.
 *   bad-chunk       "Transfer-Encoding: chunked" with the chunk size "zz"; kept open.
 *   huge-body       a body of 64 MiB (or --body-size), streamed from a small buffer.
 *   die-after:MS    write the stats and exit 0 MS after start-up (connections refused after).
 *   no-read         accept connections, never read from them (nor close them).
 *   body-204        each request is answered "204 No Content" with "Content-Length: 5" and 5
 *                   body bytes, which a 204 cannot have (RFC 9110 §15.3.5); kept open.
 *   interim-flood   each request is answered with "HTTP/1.1 100 Continue" responses (each with
 *                   a 1000-byte X-Pad field) forever, streamed with backpressure; no final
 *                   response (none of it counts in responses or interim_responses).
 *   Bad requests get their normal 400 in every mode except no-read. In garbage mode a response
 *   counts in "responses" but under no status.
 *
 * Request parsing (RFC 9112)
 *   Request line "METHOD SP TARGET SP HTTP/1.x" (1.0 or 1.1), CRLF line ends, empty lines
 *   before it ignored, header block at most 64 KiB and 128 fields, bodies framed by
 *   Content-Length or chunked (extensions and trailers accepted and skipped). Any of these is a
 *   bad request: malformed request line or field line, bare LF, whitespace before a colon,
 *   obs-fold, invalid Content-Length or two different ones, a Transfer-Encoding other than
 *   "chunked", both Content-Length and Transfer-Encoding, HTTP/1.1 without Host or with two,
 *   invalid chunk size. A bad request is answered "400 Bad Request" with "Connection: close",
 *   counted in bad_requests (not in requests, methods or paths), and the connection closed.
 *
 * Stats JSON (all counters are integers unless said otherwise)
 *   connections          connections accepted (conn numbers go 1..connections)
 *   open_connections     connections still open when the stats were written
 *   max_open_connections most connections open at once
 *   requests             complete requests parsed (bad requests excluded)
 *   responses            responses whose last byte was written (final responses; interim 1xx
 *                        are counted in interim_responses instead)
 *   bad_requests         malformed requests (each answered 400 and counted in status too)
 *   methods              {"GET": n, ...} per complete request; past 32 distinct, under "..."
 *   status               {"200": n, ...} per written response
 *   paths                {"/x": n, ...} per complete request, path without query/fragment;
 *                        past 1000 distinct, the rest under "..."
 *   bytes_in, bytes_out  bytes read from / written to client sockets
 *   requests_with_body   complete requests with a non-empty body
 *   body_bytes_in        their body bytes (de-chunked)
 *   closed_by_peer       connections ended by the client (EOF or error) while the server had
 *                        not decided to close them
 *   reset_by_peer        reads/writes that failed with ECONNRESET (subset of the closes)
 *   closed_by_server     connections the server decided to close (Connection: close,
 *                        close modes, bad request, idle close, hostile modes)
 *                        connections = closed_by_peer + closed_by_server + open_connections
 *   idle_closed          closes by --idle-close (included in closed_by_server)
 *   resets_sent          closes with RST by --hostile reset (included in closed_by_server)
 *   interim_responses    1xx responses written (--interim, Expect: 100-continue)
 *   max_requests_per_read  most complete requests parsed from one read() (pipelining depth)
 *   reads, writes        read()/write() calls that moved data
 *   uptime               seconds since start-up (float)
 * ===========================================================================================
 */

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#define READ_SIZE (64 * 1024)
#define MAX_HEAD (64 * 1024) /* request line + fields + empty line */
#define MAX_FIELDS 128
#define MAX_LINE 4096 /* chunk-size line, trailer line */
#define RBUF_SIZE (MAX_HEAD + MAX_LINE + READ_SIZE)
#define OUT_HIGH (256 * 1024)  /* unsent output above which nothing new is queued */
#define FILL_CHUNK (64 * 1024) /* bytes a body producer copies at a time */
#define QUEUE_MAX 4096         /* pending responses above which parsing pauses */
#define MAX_METHODS 32
#define MAX_PATHS 1000
#define PATH_SLOTS 2048 /* power of two, comfortably above MAX_PATHS */
#define LOG_BODY_MAX (1 << 20)
#define HUGE_HEADER (1 << 20)
#define HUGE_BODY (64ULL << 20)
#define LINGER_SECS 2.0
#define TOKEN "volley-token-1"

/* ---- configuration and global state ------------------------------------------------------ */

enum hostile {
    HOSTILE_NONE,
    HOSTILE_GARBAGE,
    HOSTILE_SHORT_BODY,
    HOSTILE_RESET,
    HOSTILE_TRICKLE,
    HOSTILE_HUGE_HEADER,
    HOSTILE_BAD_CHUNK,
    HOSTILE_HUGE_BODY,
    HOSTILE_NO_READ,
    HOSTILE_INTERIM_FLOOD,
    HOSTILE_BODY_204,
};

struct config {
    const char *listen, *stats_path, *log_path;
    double max_time; /* seconds */
    uint64_t body_size, chunk_size, close_after, every_n, rcvbuf, shed;
    bool body_size_set, chunked, close_delimited, connection_close, http10, http10_keepalive;
    bool interim, never, early;
    int status, every_code;
    double idle_close, delay, freeze_len, freeze_period, trickle, die_after; /* seconds */
    double stall_after;                                                      /* seconds; 0: never */
    enum hostile hostile;
};

struct counted {
    char *name;
    size_t len;
    uint64_t n;
};

struct tally {
    uint64_t connections, open, max_open, requests, responses, bad_requests;
    uint64_t bytes_in, bytes_out, requests_with_body, body_bytes_in;
    uint64_t closed_by_peer, reset_by_peer, closed_by_server, idle_closed, resets_sent;
    uint64_t interim, max_per_read, reads, writes, rendered;
    uint64_t status[600];
    struct counted methods[MAX_METHODS + 1]; /* the last slot is "..." */
    size_t nmethods;
    struct counted paths[PATH_SLOTS];
    size_t npaths;
    uint64_t paths_other;
};

static struct config g_cfg = {
    .listen = "127.0.0.1:0",
    .max_time = 600,
    .body_size = 12,
    .chunk_size = 5,
    .trickle = 0.010,
    .die_after = -1,
};
static struct tally g_st;
static struct ev_loop *g_loop;
static ev_tstamp g_start;
static uint64_t g_waiting;        /* --shed: requests waiting for their response to be rendered */
static ev_tstamp g_first_request; /* when the first complete request was read, or 0 */
static FILE *g_log;
static const char *g_unix_path;
static bool g_tcp;
static bool g_tchar[256];
static char g_rbuf[RBUF_SIZE];
static char g_body_pat[FILL_CHUNK + 12];
static char g_fill_pat[FILL_CHUNK + 1];
static char g_cl_hdr[64];
static size_t g_cl_hdr_len;
static ev_io g_accept;
static struct conn **g_wake; /* min-heap on wake_at */
static size_t g_wake_len, g_wake_cap;
static int g_tfd = -1;
static ev_io g_tfd_io;
static ev_timer g_accept_pause;
static struct conn *g_conns;

/* ---- connections ------------------------------------------------------------------------- */

struct buf {
    char *data;
    size_t off, len, cap; /* data[off..len) is pending */
};

enum pstate { PS_HEAD, PS_BODY, PS_CHUNK_SIZE, PS_CHUNK_DATA, PS_CHUNK_END, PS_TRAILER };
enum route { ROUTE_NONE, ROUTE_AUTH, ROUTE_RESOURCE };
enum cause { CAUSE_NONE, CAUSE_PEER, CAUSE_SERVER };

/* What the response to one request needs to know about it. */
struct req {
    uint64_t content_length, body_bytes;
    uint32_t path;   /* slot in g_st.paths, PATH_SLOTS = "..." */
    uint16_t method; /* slot in g_st.methods */
    uint8_t route;
    bool head, http10, close, keepalive, has_cl, chunked, has_host, token_ok, expect;
    bool bad, closes, say_close, say_keepalive;
    bool answered;    /* --early: the response went out before the body was read */
    bool shed, waits; /* --shed: answered 503 at once; counted in g_waiting */
};

/* A request waiting for its response to be rendered, or rendered and not yet fully written. */
struct pending {
    ev_tstamp due; /* not rendered before this (--delay) */
    uint64_t end;  /* output offset of its last byte, once rendered */
    int status;    /* 0: counts under no status */
    struct req r;
};

/* Generates a long body (or header) into the output buffer as the socket drains. */
struct producer {
    uint64_t left, off, chunk, chunk_left;
    const char *pattern, *tail;
    size_t period;
    bool active, first;
};

struct conn {
    ev_io rio, wio;
    ev_timer idle; /* --idle-close, lingering close */
    struct conn *prev, *next;
    size_t heap_idx; /* 1-based place in g_wake, 0 = no wake-up wanted */
    int fd;
    uint64_t id, nparsed, written; /* written: bytes written on this connection */
    ev_tstamp last_active, wake_at, trickle_at;
    struct buf in, out, log;
    enum pstate ps;
    uint64_t body_left, trailer_bytes, log_body;
    size_t log_fields;
    bool log_truncated;
    struct req cur;
    struct pending *q; /* ring of qcap (power of two) entries */
    size_t qcap, qhead, qlen, qrendered;
    struct producer prod;
    bool parse_done, closing, lingering, peer_eof, rst, trickle_wait, dead;
    enum cause cause;
};

static void on_read(struct ev_loop *loop, ev_io *w, int revents);
static void on_write(struct ev_loop *loop, ev_io *w, int revents);
static void on_idle(struct ev_loop *loop, ev_timer *w, int revents);
static void emit(struct conn *c);

/* ---- small helpers ----------------------------------------------------------------------- */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("volley-testd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fputs("volley-testd: out of memory\n", stderr);
        abort();
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fputs("volley-testd: out of memory\n", stderr);
        abort();
    }
    return p;
}

static char *xstrndup(const char *s, size_t n)
{
    char *p = xrealloc(NULL, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static bool ieq(const char *a, const char *b, size_t n) { return strncasecmp(a, b, n) == 0; }

/* ---- buffers ----------------------------------------------------------------------------- */

static size_t buf_pending(const struct buf *b) { return b->len - b->off; }

/* Makes room for `more` bytes after len, first by sliding pending data to the front. */
static void buf_reserve(struct buf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return;
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (b->cap - b->len >= more)
            return;
    }
    size_t cap = b->cap ? b->cap : 1024;
    while (cap - b->len < more)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

static void buf_add(struct buf *b, const void *p, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void buf_str(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static void buf_u64(struct buf *b, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRIu64, v);
    buf_add(b, t, (size_t)n);
}

static void buf_consume(struct buf *b, size_t n)
{
    b->off += n;
    if (b->off == b->len)
        b->off = b->len = 0;
}

static void buf_free(struct buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* JSON string contents; bytes >= 0x80 become \u00XX so any byte sequence stays valid JSON. */
static void json_escape(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    buf_reserve(b, n * 6);
    char *o = b->data + b->len;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char)ch;
        } else if (ch >= 0x20 && ch < 0x7f) {
            *o++ = (char)ch;
        } else if (ch == '\n' || ch == '\r' || ch == '\t') {
            *o++ = '\\';
            *o++ = ch == '\n' ? 'n' : ch == '\r' ? 'r' : 't';
        } else {
            memcpy(o, "\\u00", 4);
            o[4] = hex[ch >> 4];
            o[5] = hex[ch & 15];
            o += 6;
        }
    }
    b->len = (size_t)(o - b->data);
}

/* ---- counting what was seen -------------------------------------------------------------- */

static uint16_t method_slot(const char *m, size_t n)
{
    for (size_t i = 0; i < g_st.nmethods; i++) {
        struct counted *e = &g_st.methods[i];
        if (e->len == n && memcmp(e->name, m, n) == 0)
            return (uint16_t)i;
    }
    if (g_st.nmethods == MAX_METHODS)
        return MAX_METHODS;
    struct counted *e = &g_st.methods[g_st.nmethods];
    e->name = xstrndup(m, n);
    e->len = n;
    return (uint16_t)g_st.nmethods++;
}

/* Open addressing without deletion: slots never move, so requests keep their slot index. */
static uint32_t path_slot(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    for (size_t i = h & (PATH_SLOTS - 1);; i = (i + 1) & (PATH_SLOTS - 1)) {
        struct counted *e = &g_st.paths[i];
        if (e->name && e->len == n && memcmp(e->name, p, n) == 0)
            return (uint32_t)i;
        if (!e->name) {
            if (g_st.npaths >= MAX_PATHS)
                return PATH_SLOTS;
            e->name = xstrndup(p, n);
            e->len = n;
            g_st.npaths++;
            return (uint32_t)i;
        }
    }
}

static void count_request(const struct req *r)
{
    g_st.requests++;
    g_st.methods[r->method].n++;
    if (r->path == PATH_SLOTS)
        g_st.paths_other++;
    else
        g_st.paths[r->path].n++;
    if (r->body_bytes > 0) {
        g_st.requests_with_body++;
        g_st.body_bytes_in += r->body_bytes;
    }
}

/* ---- the request log --------------------------------------------------------------------- */

static void log_begin(struct conn *c, const char *m, size_t mlen, const char *t, size_t tlen,
                      const char *v)
{
    struct buf *b = &c->log;
    b->off = b->len = 0;
    c->log_body = 0;
    c->log_fields = 0;
    c->log_truncated = false;
    buf_str(b, "{\"conn\": ");
    buf_u64(b, c->id);
    buf_str(b, ", \"method\": \"");
    json_escape(b, m, mlen);
    buf_str(b, "\", \"target\": \"");
    json_escape(b, t, tlen);
    buf_str(b, "\", \"version\": \"");
    buf_add(b, v, 8);
    buf_str(b, "\", \"headers\": [");
}

static void log_field(struct conn *c, const char *n, size_t nlen, const char *v, size_t vlen)
{
    struct buf *b = &c->log;
    buf_str(b, c->log_fields++ ? ", [\"" : "[\"");
    json_escape(b, n, nlen);
    buf_str(b, "\", \"");
    json_escape(b, v, vlen);
    buf_str(b, "\"]");
}

static void log_body(struct conn *c, const char *p, size_t n)
{
    size_t room = LOG_BODY_MAX - c->log_body;
    if (n > room) {
        n = room;
        c->log_truncated = true;
    }
    json_escape(&c->log, p, n);
    c->log_body += n;
}

static void log_finish(struct conn *c)
{
    buf_str(&c->log, c->log_truncated ? "\", \"body_truncated\": true}\n" : "\"}\n");
    fwrite(c->log.data, 1, c->log.len, g_log);
}

/* ---- request parsing (RFC 9112) ---------------------------------------------------------- */

static void queue_grow(struct conn *c);

static struct pending *q_at(struct conn *c, size_t i)
{
    return &c->q[(c->qhead + i) & (c->qcap - 1)];
}

static struct pending *q_push(struct conn *c)
{
    if (c->qlen == c->qcap)
        queue_grow(c);
    struct pending *p = q_at(c, c->qlen++);
    memset(p, 0, sizeof *p);
    p->end = UINT64_MAX;
    return p;
}

static void queue_grow(struct conn *c)
{
    size_t cap = c->qcap ? c->qcap * 2 : 8;
    struct pending *q = xcalloc(cap, sizeof *q);
    for (size_t i = 0; i < c->qlen; i++)
        q[i] = *q_at(c, i);
    free(c->q);
    c->q = q;
    c->qcap = cap;
    c->qhead = 0;
}

static bool parse_allowed(const struct conn *c)
{
    return !c->parse_done && !c->rst && !c->lingering && c->qlen < QUEUE_MAX &&
           buf_pending(&c->out) < OUT_HIGH;
}

static void bad_request(struct conn *c)
{
    g_st.bad_requests++;
    c->parse_done = true;
    c->ps = PS_HEAD;
    struct pending *p = q_push(c);
    p->r.bad = true;
    p->r.closes = true;
}

/* Who closes after this response, and what the response says about it. */
static void decide_close(struct conn *c, struct req *r)
{
    bool old_close = r->http10 && !r->keepalive;
    bool limit = g_cfg.close_after && c->nparsed == g_cfg.close_after;
    r->say_close = !g_cfg.http10 && (g_cfg.connection_close || r->close || old_close || limit);
    r->closes = r->say_close || g_cfg.http10 || g_cfg.close_delimited ||
                g_cfg.hostile == HOSTILE_SHORT_BODY;
    r->say_keepalive = !r->closes && (g_cfg.http10_keepalive || r->http10);
}

/* Queues the response to the current request. */
static void answer(struct conn *c)
{
    struct req *r = &c->cur;
    decide_close(c, r);
    r->shed = g_cfg.shed && g_waiting >= g_cfg.shed;
    r->waits = g_cfg.shed && !r->shed;
    g_waiting += r->waits;
    struct pending *p = q_push(c);
    p->due = g_cfg.delay > 0 && !r->shed ? ev_now(g_loop) + g_cfg.delay : 0;
    p->r = *r;
    if (r->closes)
        c->parse_done = true;
}

static void request_done(struct conn *c)
{
    struct req *r = &c->cur;
    c->ps = PS_HEAD;
    c->nparsed++;
    count_request(r);
    if (!g_first_request)
        g_first_request = ev_now(g_loop);
    if (g_log)
        log_finish(c);
    if (r->answered)
        return;
    if (g_cfg.hostile == HOSTILE_RESET) {
        c->rst = true;
        return;
    }
    if (g_cfg.never)
        return;
    answer(c);
}

/* Length of the header block up to and including its empty line, 0 if incomplete. A bare LF
 * also ends it so that such requests get their 400 at once instead of waiting for more. */
static size_t head_length(const char *p, size_t n)
{
    const char *end = p + n;
    for (const char *q = memchr(p, '\n', n); q; q = memchr(q + 1, '\n', (size_t)(end - q - 1))) {
        if (q + 1 < end && q[1] == '\n')
            return (size_t)(q + 2 - p);
        if (q + 2 < end && q[1] == '\r' && q[2] == '\n')
            return (size_t)(q + 3 - p);
    }
    return 0;
}

/* The CR of the CRLF ending the line at p, or NULL for a bare LF. */
static const char *line_end(const char *p, const char *end)
{
    const char *q = memchr(p, '\n', (size_t)(end - p));
    if (!q || q == p || q[-1] != '\r')
        return NULL;
    return q - 1;
}

static size_t path_length(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] == '?' || t[i] == '#')
            return i;
    return n;
}

static uint8_t route_of(const char *t, size_t n)
{
    /* absolute-form (RFC 9112 §3.2.2): the path starts after the authority */
    const char *s = n && t[0] != '/' ? memmem(t, n, "://", 3) : NULL;
    if (s) {
        const char *slash = memchr(s + 3, '/', (size_t)(t + n - s - 3));
        n = slash ? (size_t)(t + n - slash) : 0;
        t = slash ? slash : t;
    }
    size_t len = path_length(t, n);
    if (len == 13 && memcmp(t, "/authenticate", 13) == 0)
        return ROUTE_AUTH;
    if (len == 9 && memcmp(t, "/resource", 9) == 0)
        return ROUTE_RESOURCE;
    return ROUTE_NONE;
}

static bool parse_request_line(struct conn *c, const char *p, const char *eol)
{
    struct req *r = &c->cur;
    const char *sp1 = p;
    while (sp1 < eol && g_tchar[(unsigned char)*sp1])
        sp1++;
    if (sp1 == p || sp1 == eol || *sp1 != ' ')
        return false;
    const char *t = sp1 + 1, *sp2 = t;
    while (sp2 < eol && (unsigned char)*sp2 > 0x20 && *sp2 != 0x7f)
        sp2++;
    if (sp2 == t || sp2 == eol || *sp2 != ' ')
        return false;
    const char *v = sp2 + 1;
    if (eol - v != 8 || memcmp(v, "HTTP/1.", 7) != 0 || (v[7] != '0' && v[7] != '1'))
        return false;
    size_t tlen = (size_t)(sp2 - t);
    r->http10 = v[7] == '0';
    r->head = sp1 - p == 4 && memcmp(p, "HEAD", 4) == 0;
    r->method = method_slot(p, (size_t)(sp1 - p));
    r->route = route_of(t, tlen);
    r->path = path_slot(t, path_length(t, tlen));
    if (g_log)
        log_begin(c, p, (size_t)(sp1 - p), t, tlen, v);
    return true;
}

static bool parse_content_length(struct req *r, const char *v, size_t n)
{
    if (n == 0 || n > 15)
        return false;
    uint64_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        len = len * 10 + (uint64_t)(v[i] - '0');
    }
    /* RFC 9112 §6.3: repeated identical values are the same message length; others are not */
    if (r->has_cl && r->content_length != len)
        return false;
    r->has_cl = true;
    r->content_length = len;
    return true;
}

static void parse_connection(struct req *r, const char *v, size_t n)
{
    const char *end = v + n;
    while (v < end) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
            v++;
        const char *t = v;
        while (v < end && *v != ',' && *v != ' ' && *v != '\t')
            v++;
        size_t len = (size_t)(v - t);
        if (len == 5 && ieq(t, "close", 5))
            r->close = true;
        else if (len == 10 && ieq(t, "keep-alive", 10))
            r->keepalive = true;
    }
}

static bool known_field(struct req *r, const char *n, size_t nlen, const char *v, size_t vlen)
{
    switch (nlen) {
    case 4:
        if (ieq(n, "host", 4)) {
            if (r->has_host)
                return false;
            r->has_host = true;
        }
        break;
    case 6:
        if (ieq(n, "expect", 6))
            r->expect = vlen == 12 && ieq(v, "100-continue", 12);
        break;
    case 7:
        if (ieq(n, "x-token", 7))
            r->token_ok = vlen == strlen(TOKEN) && memcmp(v, TOKEN, vlen) == 0;
        break;
    case 10:
        if (ieq(n, "connection", 10))
            parse_connection(r, v, vlen);
        break;
    case 14:
        if (ieq(n, "content-length", 14))
            return parse_content_length(r, v, vlen);
        break;
    case 17:
        if (ieq(n, "transfer-encoding", 17)) {
            if (r->chunked || vlen != 7 || !ieq(v, "chunked", 7))
                return false;
            r->chunked = true;
        }
        break;
    }
    return true;
}

/* RFC 9112 §5.1: no whitespace between name and colon; obs-fold fails the token check too. */
static bool parse_field(struct conn *c, const char *p, const char *eol)
{
    const char *colon = memchr(p, ':', (size_t)(eol - p));
    if (!colon || colon == p)
        return false;
    for (const char *q = p; q < colon; q++)
        if (!g_tchar[(unsigned char)*q])
            return false;
    const char *v = colon + 1, *ve = eol;
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    for (const char *q = v; q < ve; q++) {
        unsigned char ch = (unsigned char)*q;
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    if (g_log)
        log_field(c, p, (size_t)(colon - p), v, (size_t)(ve - v));
    return known_field(&c->cur, p, (size_t)(colon - p), v, (size_t)(ve - v));
}

static bool parse_request_head(struct conn *c, const char *p, size_t len)
{
    struct req *r = &c->cur;
    const char *end = p + len, *eol = line_end(p, end);
    memset(r, 0, sizeof *r);
    if (!eol || !parse_request_line(c, p, eol))
        return false;
    for (size_t nfields = 0;; nfields++) {
        p = eol + 2;
        if (!(eol = line_end(p, end)))
            return false;
        if (eol == p)
            break;
        if (nfields == MAX_FIELDS || !parse_field(c, p, eol))
            return false;
    }
    /* RFC 9112 §6.1: both framings at once is how requests get smuggled; refuse it */
    if (r->has_cl && r->chunked)
        return false;
    return r->http10 || r->has_host; /* RFC 9112 §3.2: Host is mandatory in HTTP/1.1 */
}

/* Answers "Expect: 100-continue" only when nothing is queued ahead (it must not overtake). */
static void maybe_continue(struct conn *c)
{
    const struct req *r = &c->cur;
    if (!r->expect || r->http10 || g_cfg.interim || g_cfg.never || c->qlen ||
        buf_pending(&c->out) || c->prod.active || g_cfg.hostile != HOSTILE_NONE)
        return;
    buf_str(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
    g_st.interim++;
}

static void begin_body(struct conn *c)
{
    struct req *r = &c->cur;
    if (g_log)
        buf_str(&c->log, "], \"body\": \"");
    if (g_cfg.early && !g_cfg.never && (r->chunked || r->content_length > 0)) {
        answer(c);
        r->answered = true;
    }
    if (r->chunked) {
        c->ps = PS_CHUNK_SIZE;
        c->trailer_bytes = 0;
    } else if (r->content_length > 0) {
        c->ps = PS_BODY;
        c->body_left = r->content_length;
    } else {
        request_done(c);
        return;
    }
    maybe_continue(c);
}

static size_t parse_head(struct conn *c, const char *p, size_t n)
{
    size_t skip = 0;
    while (skip < n && (p[skip] == '\r' || p[skip] == '\n')) /* RFC 9112 §2.2 */
        skip++;
    if (skip > 0)
        return skip;
    size_t len = head_length(p, n < MAX_HEAD ? n : MAX_HEAD);
    if (len == 0) {
        if (n >= MAX_HEAD)
            bad_request(c);
        return 0;
    }
    if (!parse_request_head(c, p, len)) {
        bad_request(c);
        return 0;
    }
    begin_body(c);
    return len;
}

static size_t parse_body_bytes(struct conn *c, const char *p, size_t n)
{
    if (n > c->body_left)
        n = (size_t)c->body_left;
    if (g_log)
        log_body(c, p, n);
    c->cur.body_bytes += n;
    c->body_left -= n;
    if (c->body_left == 0) {
        if (c->ps == PS_BODY)
            request_done(c);
        else
            c->ps = PS_CHUNK_END;
    }
    return n;
}

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* chunk-size [ BWS ";" chunk-ext ] CRLF (RFC 9112 §7.1) */
static size_t parse_chunk_size(struct conn *c, const char *p, size_t n)
{
    const char *nl = memchr(p, '\n', n < MAX_LINE ? n : MAX_LINE);
    if (!nl) {
        if (n >= MAX_LINE)
            bad_request(c);
        return 0;
    }
    const char *q = p, *eol = nl - 1;
    uint64_t size = 0;
    int d;
    while (q < nl && (d = hex_digit(*q)) >= 0 && size < (1ULL << 56)) {
        size = size * 16 + (uint64_t)d;
        q++;
    }
    while (q < eol && (*q == ' ' || *q == '\t'))
        q++;
    if (q == p || nl == p || *eol != '\r' || (q < eol && *q != ';') || hex_digit(*q) >= 0) {
        bad_request(c);
        return 0;
    }
    c->body_left = size;
    c->ps = size ? PS_CHUNK_DATA : PS_TRAILER;
    return (size_t)(nl + 1 - p);
}

static size_t parse_chunk_end(struct conn *c, const char *p, size_t n)
{
    if (p[0] != '\r' || (n > 1 && p[1] != '\n')) {
        bad_request(c);
        return 0;
    }
    if (n < 2)
        return 0;
    c->ps = PS_CHUNK_SIZE;
    return 2;
}

/* Trailer fields are skipped: nothing here depends on them. */
static size_t parse_trailer(struct conn *c, const char *p, size_t n)
{
    const char *nl = memchr(p, '\n', n < MAX_LINE ? n : MAX_LINE);
    if (!nl) {
        if (n >= MAX_LINE)
            bad_request(c);
        return 0;
    }
    size_t len = (size_t)(nl + 1 - p);
    c->trailer_bytes += len;
    if (nl == p || nl[-1] != '\r' || c->trailer_bytes > MAX_HEAD) {
        bad_request(c);
        return 0;
    }
    if (len == 2)
        request_done(c);
    return len;
}

/* Parses as many requests as buf[0..len) holds; returns the bytes consumed. */
static size_t parse(struct conn *c, const char *buf, size_t len)
{
    size_t pos = 0;
    while (pos < len && parse_allowed(c)) {
        const char *p = buf + pos;
        size_t n = len - pos, used = 0;
        switch (c->ps) {
        case PS_HEAD:
            used = parse_head(c, p, n);
            break;
        case PS_BODY:
        case PS_CHUNK_DATA:
            used = parse_body_bytes(c, p, n);
            break;
        case PS_CHUNK_SIZE:
            used = parse_chunk_size(c, p, n);
            break;
        case PS_CHUNK_END:
            used = parse_chunk_end(c, p, n);
            break;
        case PS_TRAILER:
            used = parse_trailer(c, p, n);
            break;
        }
        if (used == 0)
            break;
        pos += used;
    }
    return pos;
}

static size_t parse_saved(struct conn *c)
{
    size_t used = parse(c, c->in.data + c->in.off, buf_pending(&c->in));
    buf_consume(&c->in, used);
    return used;
}

/* ---- rendering responses ----------------------------------------------------------------- */

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Status";
    }
}

static void status_line(struct buf *o, const char *version, int status)
{
    char code[5] = {(char)('0' + status / 100), (char)('0' + status / 10 % 10),
                    (char)('0' + status % 10), ' ', '\0'};
    buf_str(o, version);
    buf_add(o, code, 4);
    buf_str(o, reason(status));
    buf_add(o, "\r\n", 2);
}

static void start_body(struct conn *c, uint64_t len, const char *pattern, size_t period,
                       uint64_t chunk, const char *tail)
{
    c->prod = (struct producer){
        .left = len,
        .pattern = pattern,
        .period = period,
        .chunk = chunk,
        .tail = tail,
        .active = true,
        .first = true,
    };
}

/* The output offset just past everything queued so far on the connection. */
static uint64_t out_mark(const struct conn *c) { return c->written + buf_pending(&c->out); }

static void finish_body(struct conn *c)
{
    if (c->prod.tail)
        buf_str(&c->out, c->prod.tail);
    c->prod.active = false;
    q_at(c, c->qrendered - 1)->end = out_mark(c);
}

static void chunk_header(struct conn *c)
{
    struct producer *p = &c->prod;
    uint64_t n = p->left < p->chunk ? p->left : p->chunk;
    char t[48];
    int len = snprintf(t, sizeof t, "%" PRIx64 "%s\r\n", n, p->first ? ";volley=1" : "");
    buf_add(&c->out, t, (size_t)len);
    p->first = false;
    p->chunk_left = n;
}

/* Tops the output buffer up to OUT_HIGH from the pattern, so a 64 MiB body costs 256 KiB. */
static void produce(struct conn *c)
{
    struct producer *p = &c->prod;
    while (p->active && buf_pending(&c->out) < OUT_HIGH) {
        if (p->chunk && p->chunk_left == 0 && p->left > 0)
            chunk_header(c);
        uint64_t want = p->chunk ? p->chunk_left : p->left;
        size_t n = want < FILL_CHUNK ? (size_t)want : FILL_CHUNK;
        if (n > 0) {
            buf_add(&c->out, p->pattern + p->off % p->period, n);
            p->off += n;
            p->left -= n;
            if (p->chunk && (p->chunk_left -= n) == 0)
                buf_add(&c->out, "\r\n", 2);
        }
        if (p->left == 0 && p->chunk_left == 0)
            finish_body(c);
    }
}

static int pick_status(const struct req *r)
{
    uint64_t nth = ++g_st.rendered;
    if (r->route == ROUTE_RESOURCE && !r->token_ok)
        return 401;
    if (r->shed)
        return 503;
    if (g_cfg.every_n && nth % g_cfg.every_n == 0)
        return g_cfg.every_code;
    return g_cfg.status ? g_cfg.status : 200;
}

static void render_final(struct conn *c, struct pending *p)
{
    static const char interim[] = "HTTP/1.1 100 Continue\r\n\r\n"
                                  "HTTP/1.1 103 Early Hints\r\n"
                                  "Link: </style.css>; rel=preload\r\n\r\n";
    const struct req *r = &p->r;
    struct buf *o = &c->out;
    int status = pick_status(r);
    bool framed = status != 204 && status != 304; /* RFC 9110 §6.4.1: never a body */
    if (g_cfg.interim && !r->http10) {
        buf_add(o, interim, sizeof interim - 1);
        g_st.interim += 2;
    }
    status_line(o, g_cfg.http10 || g_cfg.http10_keepalive ? "HTTP/1.0 " : "HTTP/1.1 ", status);
    buf_str(o, "Server: volley-testd\r\nContent-Type: text/plain\r\n");
    if (r->route == ROUTE_AUTH)
        buf_str(o, "X-Token: " TOKEN "\r\n");
    if (framed && g_cfg.chunked)
        buf_str(o, "Transfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n");
    else if (framed && !g_cfg.close_delimited)
        buf_add(o, g_cl_hdr, g_cl_hdr_len);
    if (r->say_close)
        buf_str(o, "Connection: close\r\n");
    else if (r->say_keepalive)
        buf_str(o, "Connection: keep-alive\r\n");
    buf_add(o, "\r\n", 2);
    p->status = status;
    if (framed && !r->head)
        start_body(c, g_cfg.body_size, g_body_pat, 12, g_cfg.chunked ? g_cfg.chunk_size : 0,
                   g_cfg.chunked ? "0\r\nX-Trailer: end\r\n\r\n" : NULL);
}

/* --hostile interim-flood: one interim response, repeated so that the body
 * producer can copy FILL_CHUNK bytes from any offset into it. */
#define INTERIM_FLOOD_LEN 1034 /* "HTTP/1.1 100 Continue\r\nX-Pad: " + 1000 + "\r\n\r\n" */
static const char *interim_flood_pattern(void)
{
    static char pattern[FILL_CHUNK + INTERIM_FLOOD_LEN];
    if (!pattern[0]) {
        char one[INTERIM_FLOOD_LEN + 1];
        int n = snprintf(one, sizeof one, "HTTP/1.1 100 Continue\r\nX-Pad: %01000d\r\n\r\n", 0);
        if (n != INTERIM_FLOOD_LEN)
            die("interim-flood: a response of %d bytes", n);
        for (size_t i = 0; i < sizeof pattern; i++)
            pattern[i] = one[i % INTERIM_FLOOD_LEN];
    }
    return pattern;
}

static bool render_hostile(struct conn *c, struct pending *p)
{
    static const char garbage[] = "garbage\r\n\r\n\x00\xff\xfe\x80\x7f\x1b[0m\x01\x02\r\n";
    struct buf *o = &c->out;
    p->status = 200;
    switch (g_cfg.hostile) {
    case HOSTILE_GARBAGE:
        buf_add(o, garbage, sizeof garbage - 1);
        p->status = 0;
        return true;
    case HOSTILE_SHORT_BODY:
        buf_str(o, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n"
                   "0123456789");
        return true;
    case HOSTILE_BAD_CHUNK:
        buf_str(o, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nHello\r\n"
                   "0\r\n\r\n");
        return true;
    case HOSTILE_HUGE_HEADER:
        buf_str(o, "HTTP/1.1 200 OK\r\nX-Huge: ");
        start_body(c, HUGE_HEADER, g_fill_pat, 1, 0,
                   "\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nHello world\n");
        return true;
    case HOSTILE_INTERIM_FLOOD:
        start_body(c, UINT64_MAX, interim_flood_pattern(), INTERIM_FLOOD_LEN, 0, NULL);
        p->status = 0;
        return true;
    case HOSTILE_BODY_204:
        buf_str(o, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello");
        p->status = 204;
        return true;
    default:
        return false;
    }
}

static void render(struct conn *c, struct pending *p)
{
    c->closing = p->r.closes;
    g_waiting -= p->r.waits;
    p->r.waits = false;
    if (p->r.bad) {
        buf_str(&c->out, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                         "Content-Length: 12\r\nConnection: close\r\n\r\nBad Request\n");
        p->status = 400;
    } else if (!render_hostile(c, p)) {
        render_final(c, p);
    }
}

/* ---- scheduling and writing -------------------------------------------------------------- */

/* Precise wake-ups. libev's epoll backend sleeps in whole milliseconds, which would turn
 * --delay 0.5 into about 1.1 ms; so connections waiting for a due time sit in a min-heap and
 * one timerfd (nanosecond resolution) is armed for the earliest of them. */
static bool wake_less(size_t a, size_t b) { return g_wake[a]->wake_at < g_wake[b]->wake_at; }

static void wake_swap(size_t a, size_t b)
{
    struct conn *t = g_wake[a];
    g_wake[a] = g_wake[b];
    g_wake[b] = t;
    g_wake[a]->heap_idx = a + 1;
    g_wake[b]->heap_idx = b + 1;
}

static void wake_up_heap(size_t i)
{
    while (i > 0 && wake_less(i, (i - 1) / 2)) {
        wake_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void wake_down_heap(size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < g_wake_len && wake_less(l, m))
            m = l;
        if (r < g_wake_len && wake_less(r, m))
            m = r;
        if (m == i)
            return;
        wake_swap(i, m);
        i = m;
    }
}

static void wake_remove(struct conn *c)
{
    if (!c->heap_idx)
        return;
    size_t i = c->heap_idx - 1;
    c->heap_idx = 0;
    if (i < --g_wake_len) {
        g_wake[i] = g_wake[g_wake_len];
        g_wake[i]->heap_idx = i + 1;
        wake_up_heap(i);
        wake_down_heap(i);
    }
}

static void wake_arm(void)
{
    struct itimerspec its = {0};
    if (g_wake_len) {
        double d = g_wake[0]->wake_at - ev_time();
        d = d > 1e-6 ? d : 1e-6; /* an all-zero it_value would disarm the timer */
        its.it_value.tv_sec = (time_t)d;
        its.it_value.tv_nsec = (long)((d - floor(d)) * 1e9);
    }
    timerfd_settime(g_tfd, 0, &its, NULL);
}

static void want_wake(struct conn *c, ev_tstamp at)
{
    if (c->heap_idx && c->wake_at <= at)
        return;
    c->wake_at = at;
    if (!c->heap_idx) {
        if (g_wake_len == g_wake_cap) {
            g_wake_cap = g_wake_cap ? g_wake_cap * 2 : 64;
            g_wake = xrealloc(g_wake, g_wake_cap * sizeof *g_wake);
        }
        g_wake[g_wake_len] = c;
        c->heap_idx = ++g_wake_len;
    }
    wake_up_heap(c->heap_idx - 1);
    if (g_wake[0] == c)
        wake_arm();
}

/* When the current --freeze window ends, or 0 outside one. After
 * --stall-after, never (an hour on is as good as never for a test). */
static ev_tstamp thaw_time(ev_tstamp now)
{
    if (g_cfg.stall_after > 0 && g_first_request && now >= g_first_request + g_cfg.stall_after)
        return now + 3600;
    if (g_cfg.freeze_period <= 0)
        return 0;
    double phase = fmod(now - g_start, g_cfg.freeze_period);
    if (phase < g_cfg.freeze_period - g_cfg.freeze_len)
        return 0;
    return now + (g_cfg.freeze_period - phase) + 1e-6;
}

/* Renders queued responses in order while they are due and there is room. */
static void emit(struct conn *c)
{
    ev_tstamp now = ev_now(g_loop);
    while (c->qrendered < c->qlen && !c->prod.active && !c->closing &&
           buf_pending(&c->out) < OUT_HIGH) {
        struct pending *p = q_at(c, c->qrendered);
        if (p->due > now) {
            want_wake(c, p->due);
            return;
        }
        ev_tstamp thaw = p->r.bad ? 0 : thaw_time(now);
        if (thaw > 0) {
            want_wake(c, thaw);
            return;
        }
        render(c, p);
        c->qrendered++;
        if (c->prod.active)
            produce(c);
        else
            p->end = out_mark(c);
    }
}

/* Counts the responses whose last byte has now been written. */
static void retire(struct conn *c)
{
    while (c->qrendered > 0) {
        struct pending *p = q_at(c, 0);
        if (p->end > c->written)
            break;
        g_st.responses++;
        if (p->status > 0)
            g_st.status[p->status]++;
        c->qhead = (c->qhead + 1) & (c->qcap - 1);
        c->qlen--;
        c->qrendered--;
    }
}

static void kill_conn(struct conn *c, enum cause cause)
{
    if (!c->dead) {
        c->dead = true;
        c->cause = cause;
    }
}

static void io_error(struct conn *c, int err)
{
    if (err == ECONNRESET)
        g_st.reset_by_peer++;
    kill_conn(c, c->closing || c->lingering ? CAUSE_SERVER : CAUSE_PEER);
}

/* Writes pending output until it is gone or the socket is full; false if the conn died. */
static bool flush(struct conn *c)
{
    while (!c->trickle_wait) {
        size_t pending = buf_pending(&c->out);
        if (pending == 0) {
            if (c->prod.active)
                produce(c);
            if (!c->prod.active)
                emit(c); /* room again: responses held back may follow */
            if (!buf_pending(&c->out))
                break;
            continue;
        }
        size_t n = g_cfg.hostile == HOSTILE_TRICKLE ? 1 : pending;
        ssize_t w = send(c->fd, c->out.data + c->out.off, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            ev_io_start(g_loop, &c->wio);
            return true;
        }
        if (w < 0) {
            io_error(c, errno);
            return false;
        }
        g_st.writes++;
        g_st.bytes_out += (uint64_t)w;
        c->written += (uint64_t)w;
        c->last_active = ev_now(g_loop);
        buf_consume(&c->out, (size_t)w);
        retire(c);
        if (g_cfg.hostile == HOSTILE_TRICKLE) {
            c->trickle_wait = true;
            c->trickle_at = ev_now(g_loop) + g_cfg.trickle;
            want_wake(c, c->trickle_at);
            break;
        }
        if ((size_t)w < n) { /* a short write means the socket buffer is full */
            ev_io_start(g_loop, &c->wio);
            return true;
        }
    }
    ev_io_stop(g_loop, &c->wio);
    return true;
}

/* ---- connection life cycle --------------------------------------------------------------- */

static void start_linger(struct conn *c)
{
    c->lingering = true;
    c->in.off = c->in.len = 0;
    shutdown(c->fd, SHUT_WR);
    wake_remove(c);
    ev_timer_stop(g_loop, &c->idle);
    ev_timer_set(&c->idle, LINGER_SECS, 0);
    ev_timer_start(g_loop, &c->idle);
}

static void update_watchers(struct conn *c)
{
    bool want =
        !c->peer_eof && (c->lingering || parse_allowed(c)) && g_cfg.hostile != HOSTILE_NO_READ;
    if (want)
        ev_io_start(g_loop, &c->rio);
    else
        ev_io_stop(g_loop, &c->rio);
}

/* After any event: parse what waits, render, write, and decide whether the conn ends. */
static void conn_run(struct conn *c)
{
    for (;;) {
        bool tried = parse_allowed(c) && buf_pending(&c->in);
        size_t used = tried ? parse_saved(c) : 0;
        emit(c);
        if (!flush(c))
            return;
        /* go round again when writing made room for requests already read */
        if (!parse_allowed(c) || !buf_pending(&c->in) || (tried && used == 0))
            break;
    }
    if (c->parse_done)
        c->in.off = c->in.len = 0;
    bool drained = !buf_pending(&c->out) && !c->prod.active;
    if (c->rst) {
        g_st.resets_sent++;
        kill_conn(c, CAUSE_SERVER);
    } else if (c->closing && drained && !c->lingering) {
        if (c->peer_eof)
            kill_conn(c, CAUSE_SERVER);
        else
            start_linger(c);
    } else if (c->peer_eof && drained && c->qlen == 0) {
        kill_conn(c, c->closing ? CAUSE_SERVER : CAUSE_PEER);
    }
    if (!c->dead)
        update_watchers(c);
}

static void conn_free(struct conn *c)
{
    for (size_t i = c->qrendered; i < c->qlen; i++) /* never to be answered */
        g_waiting -= q_at(c, i)->r.waits;
    ev_io_stop(g_loop, &c->rio);
    ev_io_stop(g_loop, &c->wio);
    wake_remove(c);
    ev_timer_stop(g_loop, &c->idle);
    if (c->rst) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(c->fd);
    if (c->cause == CAUSE_PEER)
        g_st.closed_by_peer++;
    else if (c->cause == CAUSE_SERVER)
        g_st.closed_by_server++;
    g_st.open--;
    if (c->prev)
        c->prev->next = c->next;
    else
        g_conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    buf_free(&c->in);
    buf_free(&c->out);
    buf_free(&c->log);
    free(c->q);
    free(c);
}

/* Only the top-level callbacks free a connection, so nothing below them sees a dangling one. */
static void conn_settle(struct conn *c)
{
    if (c->dead)
        conn_free(c);
}

static void conn_new(int fd)
{
    struct conn *c = xcalloc(1, sizeof *c);
    c->fd = fd;
    c->id = ++g_st.connections;
    if (++g_st.open > g_st.max_open)
        g_st.max_open = g_st.open;
    c->next = g_conns;
    if (g_conns)
        g_conns->prev = c;
    g_conns = c;
    if (g_tcp) {
        int one = 1; /* trickle and interim writes must not wait for delayed ACKs */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    ev_io_init(&c->rio, on_read, fd, EV_READ);
    ev_io_init(&c->wio, on_write, fd, EV_WRITE);
    ev_init(&c->idle, on_idle);
    c->rio.data = c->wio.data = c->idle.data = c;
    c->last_active = ev_now(g_loop);
    if (g_cfg.idle_close > 0) {
        c->idle.repeat = g_cfg.idle_close;
        ev_timer_again(g_loop, &c->idle);
    }
    update_watchers(c);
}

/* Reads once; leftovers of an incomplete request are kept in c->in and put back in front of
 * the next read in the shared buffer, so idle connections hold no read buffer. */
static void read_requests(struct conn *c)
{
    size_t have = buf_pending(&c->in);
    if (have > RBUF_SIZE - READ_SIZE) { /* cannot happen: parse limits leftovers */
        bad_request(c);
        return;
    }
    if (have)
        memcpy(g_rbuf, c->in.data + c->in.off, have);
    ssize_t n = read(c->fd, g_rbuf + have, READ_SIZE);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            io_error(c, errno);
        return;
    }
    if (n == 0) {
        c->peer_eof = true;
        return;
    }
    g_st.reads++;
    g_st.bytes_in += (uint64_t)n;
    c->last_active = ev_now(g_loop);
    c->in.off = c->in.len = 0;
    uint64_t before = g_st.requests;
    size_t total = have + (size_t)n, used = parse(c, g_rbuf, total);
    if (used < total && !c->parse_done)
        buf_add(&c->in, g_rbuf + used, total - used);
    if (g_st.requests - before > g_st.max_per_read)
        g_st.max_per_read = g_st.requests - before;
}

/* A closing connection reads and drops what the client still sends until it closes. */
static void read_lingering(struct conn *c)
{
    ssize_t n = read(c->fd, g_rbuf, READ_SIZE);
    if (n > 0) {
        g_st.reads++;
        g_st.bytes_in += (uint64_t)n;
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        kill_conn(c, CAUSE_SERVER);
    }
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    (void)loop;
    (void)revents;
    if (c->lingering)
        read_lingering(c);
    else if (parse_allowed(c))
        read_requests(c);
    if (!c->dead && !c->lingering)
        conn_run(c);
    else if (!c->dead)
        update_watchers(c);
    conn_settle(c);
}

static void on_write(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    (void)loop;
    (void)revents;
    conn_run(c);
    conn_settle(c);
}

static void conn_wake(struct conn *c)
{
    if (c->trickle_wait && ev_now(g_loop) >= c->trickle_at)
        c->trickle_wait = false;
    if (!c->lingering)
        conn_run(c);
    if (!c->dead && c->trickle_wait)
        want_wake(c, c->trickle_at);
    conn_settle(c);
}

/* Comparisons against ev_now are exact on both sides (here and in emit), so a connection
 * that is not yet due goes back to the heap instead of spinning. */
static void on_timerfd(struct ev_loop *loop, ev_io *w, int revents)
{
    uint64_t expirations;
    (void)revents;
    if (read(w->fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        die("timerfd: %s", strerror(errno));
    while (g_wake_len && g_wake[0]->wake_at <= ev_now(loop)) {
        struct conn *c = g_wake[0];
        wake_remove(c);
        conn_wake(c);
    }
    wake_arm();
}

static bool conn_idle(const struct conn *c)
{
    return c->ps == PS_HEAD && !buf_pending(&c->in) && c->qlen == 0 && !buf_pending(&c->out) &&
           !c->prod.active;
}

/* libev's "last activity" timer idiom: one timer per conn, re-armed only when it fires. */
static void on_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct conn *c = w->data;
    (void)revents;
    if (c->lingering) {
        kill_conn(c, CAUSE_SERVER);
    } else {
        ev_tstamp now = ev_now(loop);
        ev_tstamp due = conn_idle(c) ? c->last_active + g_cfg.idle_close : now + g_cfg.idle_close;
        if (due <= now) {
            g_st.idle_closed++;
            kill_conn(c, CAUSE_SERVER);
        } else {
            w->repeat = due - now;
            ev_timer_again(loop, w);
        }
    }
    conn_settle(c);
}

/* ---- listening --------------------------------------------------------------------------- */

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    for (int i = 0; i < 128; i++) {
        int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_new(fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* out of descriptors: stop accepting for a moment instead of spinning */
            ev_io_stop(loop, w);
            ev_timer_set(&g_accept_pause, 0.1, 0);
            ev_timer_start(loop, &g_accept_pause);
        }
        return;
    }
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_io_start(loop, &g_accept);
}

static int parse_port(const char *s)
{
    char *end;
    long port = strtol(s, &end, 10);
    if (!*s || *end || port < 0 || port > 65535)
        die("--listen: invalid port '%s'", s);
    return (int)port;
}

static socklen_t listen_addr(const char *spec, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (strncmp(spec, "unix:", 5) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;
        const char *path = spec + 5;
        if (!*path || strlen(path) >= sizeof un->sun_path)
            die("--listen: invalid unix socket path '%s'", path);
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        g_unix_path = path;
        return sizeof *un;
    }
    char host[64];
    const char *colon = strrchr(spec, ':');
    size_t hlen = colon ? (size_t)(colon - spec) : 0;
    if (!colon || hlen >= sizeof host)
        die("--listen: expected HOST:PORT or unix:PATH, got '%s'", spec);
    memcpy(host, spec, hlen);
    host[hlen] = '\0';
    int port = parse_port(colon + 1);
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        host[hlen - 1] = '\0';
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
            die("--listen: invalid IPv6 address '%s'", host + 1);
        return sizeof *in6;
    }
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
        die("--listen: invalid IPv4 address '%s'", host);
    return sizeof *in4;
}

static int listen_on(const char *spec)
{
    struct sockaddr_storage ss;
    socklen_t len = listen_addr(spec, &ss);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket: %s", strerror(errno));
    int one = 1;
    if (ss.ss_family == AF_UNIX) {
        struct stat sb;
        if (lstat(g_unix_path, &sb) == 0 && S_ISSOCK(sb.st_mode))
            unlink(g_unix_path); /* a stale socket from an earlier run */
    } else {
        g_tcp = true;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ss.ss_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    /* Accepted sockets inherit it: a small one makes the client's writes of a
     * large request block, so its response arrives while it is still writing. */
    if (g_cfg.rcvbuf) {
        int size = (int)g_cfg.rcvbuf;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 4096) < 0)
        die("listen %s: %s", spec, strerror(errno));
    return fd;
}

static void announce(int fd)
{
    if (g_unix_path) {
        printf("unix %s\n", g_unix_path);
    } else {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &len);
        in_port_t port = ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                  : ((struct sockaddr_in *)&ss)->sin_port;
        printf("port %u\n", (unsigned)ntohs(port));
    }
    fflush(stdout);
}

/* ---- stats ------------------------------------------------------------------------------- */

static void json_u64(struct buf *b, const char *name, uint64_t v)
{
    buf_str(b, "  \"");
    buf_str(b, name);
    buf_str(b, "\": ");
    buf_u64(b, v);
    buf_str(b, ",\n");
}

static void json_key_count(struct buf *b, bool *first, const char *k, size_t klen, uint64_t n)
{
    buf_str(b, *first ? "\"" : ", \"");
    json_escape(b, k, klen);
    buf_str(b, "\": ");
    buf_u64(b, n);
    *first = false;
}

static void json_counted(struct buf *b, const char *name, const struct counted *e, size_t n,
                         uint64_t other)
{
    bool first = true;
    buf_str(b, "  \"");
    buf_str(b, name);
    buf_str(b, "\": {");
    for (size_t i = 0; i < n; i++)
        if (e[i].name && e[i].n)
            json_key_count(b, &first, e[i].name, e[i].len, e[i].n);
    if (other)
        json_key_count(b, &first, "...", 3, other);
    buf_str(b, "},\n");
}

static void json_status(struct buf *b)
{
    bool first = true;
    buf_str(b, "  \"status\": {");
    for (int s = 0; s < 600; s++) {
        char k[12];
        snprintf(k, sizeof k, "%d", s);
        if (g_st.status[s])
            json_key_count(b, &first, k, strlen(k), g_st.status[s]);
    }
    buf_str(b, "},\n");
}

static void stats_json(struct buf *b)
{
    buf_str(b, "{\n");
    json_u64(b, "connections", g_st.connections);
    json_u64(b, "open_connections", g_st.open);
    json_u64(b, "max_open_connections", g_st.max_open);
    json_u64(b, "requests", g_st.requests);
    json_u64(b, "responses", g_st.responses);
    json_u64(b, "bad_requests", g_st.bad_requests);
    json_counted(b, "methods", g_st.methods, MAX_METHODS + 1, 0);
    json_status(b);
    json_counted(b, "paths", g_st.paths, PATH_SLOTS, g_st.paths_other);
    json_u64(b, "bytes_in", g_st.bytes_in);
    json_u64(b, "bytes_out", g_st.bytes_out);
    json_u64(b, "requests_with_body", g_st.requests_with_body);
    json_u64(b, "body_bytes_in", g_st.body_bytes_in);
    json_u64(b, "closed_by_peer", g_st.closed_by_peer);
    json_u64(b, "reset_by_peer", g_st.reset_by_peer);
    json_u64(b, "closed_by_server", g_st.closed_by_server);
    json_u64(b, "idle_closed", g_st.idle_closed);
    json_u64(b, "resets_sent", g_st.resets_sent);
    json_u64(b, "interim_responses", g_st.interim);
    json_u64(b, "max_requests_per_read", g_st.max_per_read);
    json_u64(b, "reads", g_st.reads);
    json_u64(b, "writes", g_st.writes);
    char up[64];
    snprintf(up, sizeof up, "  \"uptime\": %.3f\n}\n", ev_time() - g_start);
    buf_str(b, up);
}

static void stats_write(void)
{
    if (g_log)
        fflush(g_log);
    if (!g_cfg.stats_path)
        return;
    struct buf b = {0};
    stats_json(&b);
    size_t plen = strlen(g_cfg.stats_path);
    char *tmp = xrealloc(NULL, plen + 5);
    memcpy(tmp, g_cfg.stats_path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "w");
    bool ok = f && fwrite(b.data, 1, b.len, f) == b.len;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, g_cfg.stats_path) != 0)
        fprintf(stderr, "volley-testd: %s: %s\n", g_cfg.stats_path, strerror(errno));
    free(tmp);
    buf_free(&b);
}

/* ---- signals and process timers ---------------------------------------------------------- */

static void on_stop_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static void on_usr1(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    stats_write();
}

static void on_exit_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

/* ---- command line ------------------------------------------------------------------------ */

static double opt_number(const char *opt, const char *s, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || v < min || v > max)
        die("--%s: invalid value '%s'", opt, s);
    return v;
}

static uint64_t opt_size(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    else if (*end == 'g' || *end == 'G')
        shift = 30;
    if (shift)
        end++;
    if (end == s || *end || errno || s[0] == '-' || v > (1ULL << 50) >> shift)
        die("--%s: invalid size '%s'", opt, s);
    return (uint64_t)v << shift;
}

/* "A:B" with both parts numbers. */
static void opt_pair(const char *opt, const char *s, double *a, double *b)
{
    char first[64];
    const char *colon = strchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof first)
        die("--%s: expected A:B, got '%s'", opt, s);
    memcpy(first, s, (size_t)(colon - s));
    first[colon - s] = '\0';
    *a = opt_number(opt, first, 0, 1e12);
    *b = opt_number(opt, colon + 1, 0, 1e12);
}

static int opt_status(const char *opt, double v)
{
    if (v != floor(v) || v < 200 || v > 599)
        die("--%s: status must be 200..599", opt);
    return (int)v;
}

static void opt_hostile(const char *s)
{
    static const char *const kinds[] = {
        [HOSTILE_GARBAGE] = "garbage",
        [HOSTILE_SHORT_BODY] = "short-body",
        [HOSTILE_RESET] = "reset",
        [HOSTILE_TRICKLE] = "trickle",
        [HOSTILE_HUGE_HEADER] = "huge-header",
        [HOSTILE_BAD_CHUNK] = "bad-chunk",
        [HOSTILE_HUGE_BODY] = "huge-body",
        [HOSTILE_NO_READ] = "no-read",
        [HOSTILE_INTERIM_FLOOD] = "interim-flood",
        [HOSTILE_BODY_204] = "body-204",
    };
    if (strncmp(s, "die-after:", 10) == 0) {
        g_cfg.die_after = opt_number("hostile die-after", s + 10, 0, 1e12) / 1000;
        return;
    }
    for (size_t i = 1; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(s, kinds[i]) == 0) {
            g_cfg.hostile = (enum hostile)i;
            return;
        }
    }
    die("--hostile: unknown kind '%s'", s);
}

static void usage(void)
{
    puts("usage: volley-testd [--listen ADDR] [--stats FILE] [--log FILE] [--max-time S]\n"
         "         [--body-size N] [--chunked] [--chunk-size N] [--close-delimited]\n"
         "         [--connection-close] [--http10] [--http10-keepalive] [--close-after N]\n"
         "         [--idle-close MS] [--status CODE] [--status-every N:CODE] [--delay MS]\n"
         "         [--freeze MS:PERIOD_MS] [--stall-after MS] [--shed N] [--interim]\n"
         "         [--never] [--early]\n"
         "         [--rcvbuf N] [--trickle-ms MS]\n"
         "         [--hostile garbage|short-body|reset|trickle|huge-header|bad-chunk|\n"
         "                    huge-body|die-after:MS|no-read|interim-flood|body-204]\n"
         "The comment at the top of tests/server/testd.c documents every option.");
}

enum opt {
    OPT_LISTEN = 256,
    OPT_STATS,
    OPT_LOG,
    OPT_MAX_TIME,
    OPT_BODY_SIZE,
    OPT_CHUNKED,
    OPT_CHUNK_SIZE,
    OPT_CLOSE_DELIMITED,
    OPT_CONNECTION_CLOSE,
    OPT_HTTP10,
    OPT_HTTP10_KEEPALIVE,
    OPT_CLOSE_AFTER,
    OPT_IDLE_CLOSE,
    OPT_STATUS,
    OPT_STATUS_EVERY,
    OPT_DELAY,
    OPT_FREEZE,
    OPT_STALL_AFTER,
    OPT_SHED,
    OPT_INTERIM,
    OPT_NEVER,
    OPT_EARLY,
    OPT_RCVBUF,
    OPT_TRICKLE_MS,
    OPT_HOSTILE,
};

static void opt_status_every(const char *v)
{
    double n, code;
    opt_pair("status-every", v, &n, &code);
    if (n < 1 || n != floor(n))
        die("--status-every: N must be a positive integer");
    g_cfg.every_n = (uint64_t)n;
    g_cfg.every_code = opt_status("status-every", code);
}

static void opt_freeze(const char *v)
{
    double len, period;
    opt_pair("freeze", v, &len, &period);
    if (len <= 0 || len > period)
        die("--freeze: need 0 < MS <= PERIOD_MS");
    g_cfg.freeze_len = len / 1000;
    g_cfg.freeze_period = period / 1000;
}

static void apply_option(int opt, const char *name, const char *v)
{
    switch (opt) {
    case OPT_LISTEN:
        g_cfg.listen = v;
        break;
    case OPT_STATS:
        g_cfg.stats_path = v;
        break;
    case OPT_LOG:
        g_cfg.log_path = v;
        break;
    case OPT_MAX_TIME:
        g_cfg.max_time = opt_number(name, v, 0, 1e9);
        break;
    case OPT_BODY_SIZE:
        g_cfg.body_size = opt_size(name, v);
        g_cfg.body_size_set = true;
        break;
    case OPT_CHUNKED:
        g_cfg.chunked = true;
        break;
    case OPT_CHUNK_SIZE:
        g_cfg.chunk_size = opt_size(name, v);
        break;
    case OPT_CLOSE_DELIMITED:
        g_cfg.close_delimited = true;
        break;
    case OPT_CONNECTION_CLOSE:
        g_cfg.connection_close = true;
        break;
    case OPT_HTTP10:
        g_cfg.http10 = true;
        break;
    case OPT_HTTP10_KEEPALIVE:
        g_cfg.http10_keepalive = true;
        break;
    case OPT_CLOSE_AFTER:
        g_cfg.close_after = opt_size(name, v);
        break;
    case OPT_IDLE_CLOSE:
        g_cfg.idle_close = opt_number(name, v, 0, 1e12) / 1000;
        break;
    case OPT_STATUS:
        g_cfg.status = opt_status(name, opt_number(name, v, 0, 999));
        break;
    case OPT_STATUS_EVERY:
        opt_status_every(v);
        break;
    case OPT_DELAY:
        g_cfg.delay = opt_number(name, v, 0, 1e12) / 1000;
        break;
    case OPT_FREEZE:
        opt_freeze(v);
        break;
    case OPT_STALL_AFTER:
        g_cfg.stall_after = opt_number(name, v, 1, 1e12) / 1000;
        break;
    case OPT_SHED:
        g_cfg.shed = (uint64_t)opt_number(name, v, 1, 1e9);
        break;
    case OPT_INTERIM:
        g_cfg.interim = true;
        break;
    case OPT_NEVER:
        g_cfg.never = true;
        break;
    case OPT_EARLY:
        g_cfg.early = true;
        break;
    case OPT_RCVBUF:
        g_cfg.rcvbuf = opt_size(name, v);
        break;
    case OPT_TRICKLE_MS:
        g_cfg.trickle = opt_number(name, v, 0, 1e9) / 1000;
        break;
    case OPT_HOSTILE:
        opt_hostile(v);
        break;
    }
}

static void check_config(void)
{
    if (g_cfg.chunk_size == 0)
        die("--chunk-size: must be at least 1");
    if (g_cfg.chunked && (g_cfg.close_delimited || g_cfg.http10 || g_cfg.http10_keepalive))
        die("--chunked: cannot be combined with --close-delimited or HTTP/1.0 responses");
    if (g_cfg.http10 && g_cfg.http10_keepalive)
        die("--http10 and --http10-keepalive exclude each other");
    if (g_cfg.hostile == HOSTILE_HUGE_BODY && !g_cfg.body_size_set)
        g_cfg.body_size = HUGE_BODY;
}

static void parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, 0, OPT_LISTEN},
        {"stats", required_argument, 0, OPT_STATS},
        {"log", required_argument, 0, OPT_LOG},
        {"max-time", required_argument, 0, OPT_MAX_TIME},
        {"body-size", required_argument, 0, OPT_BODY_SIZE},
        {"chunked", no_argument, 0, OPT_CHUNKED},
        {"chunk-size", required_argument, 0, OPT_CHUNK_SIZE},
        {"close-delimited", no_argument, 0, OPT_CLOSE_DELIMITED},
        {"connection-close", no_argument, 0, OPT_CONNECTION_CLOSE},
        {"http10", no_argument, 0, OPT_HTTP10},
        {"http10-keepalive", no_argument, 0, OPT_HTTP10_KEEPALIVE},
        {"close-after", required_argument, 0, OPT_CLOSE_AFTER},
        {"idle-close", required_argument, 0, OPT_IDLE_CLOSE},
        {"status", required_argument, 0, OPT_STATUS},
        {"status-every", required_argument, 0, OPT_STATUS_EVERY},
        {"delay", required_argument, 0, OPT_DELAY},
        {"freeze", required_argument, 0, OPT_FREEZE},
        {"stall-after", required_argument, 0, OPT_STALL_AFTER},
        {"shed", required_argument, 0, OPT_SHED},
        {"interim", no_argument, 0, OPT_INTERIM},
        {"never", no_argument, 0, OPT_NEVER},
        {"early", no_argument, 0, OPT_EARLY},
        {"rcvbuf", required_argument, 0, OPT_RCVBUF},
        {"trickle-ms", required_argument, 0, OPT_TRICKLE_MS},
        {"hostile", required_argument, 0, OPT_HOSTILE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int idx, ch;
    while ((ch = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (ch == 'h') {
            usage();
            exit(0);
        }
        if (ch < OPT_LISTEN) {
            usage();
            exit(1);
        }
        apply_option(ch, opts[idx].name, optarg);
    }
    if (optind < argc)
        die("unexpected argument '%s'", argv[optind]);
    check_config();
}

/* ---- start-up and shutdown --------------------------------------------------------------- */

static void init_tables(void)
{
    static const char extra[] = "!#$%&'*+-.^_`|~"; /* RFC 9110 §5.6.2 tchar */
    for (int ch = '0'; ch <= '9'; ch++)
        g_tchar[ch] = true;
    for (int ch = 'a'; ch <= 'z'; ch++)
        g_tchar[ch] = g_tchar[ch - 'a' + 'A'] = true;
    for (const char *p = extra; *p; p++)
        g_tchar[(unsigned char)*p] = true;
    for (size_t i = 0; i < sizeof g_body_pat; i++)
        g_body_pat[i] = "Hello world\n"[i % 12];
    memset(g_fill_pat, 'a', sizeof g_fill_pat);
    int n = snprintf(g_cl_hdr, sizeof g_cl_hdr, "Content-Length: %" PRIu64 "\r\n", g_cfg.body_size);
    g_cl_hdr_len = (size_t)n;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void open_log(void)
{
    if (!g_cfg.log_path)
        return;
    g_log = fopen(g_cfg.log_path, "a");
    if (!g_log)
        die("%s: %s", g_cfg.log_path, strerror(errno));
    setvbuf(g_log, NULL, _IOFBF, 1 << 20);
}

static void shutdown_all(void)
{
    ev_io_stop(g_loop, &g_accept);
    close(g_accept.fd);
    stats_write();
    if (g_unix_path)
        unlink(g_unix_path);
    while (g_conns)
        conn_free(g_conns);
    ev_io_stop(g_loop, &g_tfd_io);
    close(g_tfd);
    free(g_wake);
    if (g_log)
        fclose(g_log);
    for (size_t i = 0; i < PATH_SLOTS; i++)
        free(g_st.paths[i].name);
    for (size_t i = 0; i <= MAX_METHODS; i++)
        free(g_st.methods[i].name);
}

int main(int argc, char **argv)
{
    static ev_signal sigterm, sigint, sigusr1;
    static ev_timer max_time, die_after;
    parse_args(argc, argv);
    init_tables();
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    g_st.methods[MAX_METHODS].name = xstrndup("...", 3);
    g_st.methods[MAX_METHODS].len = 3;
    g_loop = ev_default_loop(0);
    open_log();
    int fd = listen_on(g_cfg.listen);
    ev_io_init(&g_accept, on_accept, fd, EV_READ);
    ev_io_start(g_loop, &g_accept);
    ev_init(&g_accept_pause, on_accept_pause);
    g_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (g_tfd < 0)
        die("timerfd_create: %s", strerror(errno));
    ev_io_init(&g_tfd_io, on_timerfd, g_tfd, EV_READ);
    ev_io_start(g_loop, &g_tfd_io);
    ev_signal_init(&sigterm, on_stop_signal, SIGTERM);
    ev_signal_init(&sigint, on_stop_signal, SIGINT);
    ev_signal_init(&sigusr1, on_usr1, SIGUSR1);
    ev_signal_start(g_loop, &sigterm);
    ev_signal_start(g_loop, &sigint);
    ev_signal_start(g_loop, &sigusr1);
    ev_now_update(g_loop);
    g_start = ev_now(g_loop);
    ev_timer_init(&max_time, on_exit_timer, g_cfg.max_time, 0);
    ev_timer_start(g_loop, &max_time);
    if (g_cfg.die_after >= 0) {
        ev_timer_init(&die_after, on_exit_timer, g_cfg.die_after, 0);
        ev_timer_start(g_loop, &die_after);
    }
    announce(fd);
    ev_run(g_loop, 0);
    shutdown_all();
    ev_loop_destroy(g_loop);
    return 0;
}
