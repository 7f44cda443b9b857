/* Remote write: the protobuf encoding of Prometheus' WriteRequest, written by
 * hand (three small messages), and the HTTP/1.1 client that delivers it.
 *
 *   WriteRequest { repeated TimeSeries timeseries = 1; }
 *   TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
 *   Label        { string name = 1; string value = 2; }
 *   Sample       { double value = 1; int64 timestamp = 2; }
 *
 * The client keeps one connection (keep-alive) and one push on its way at
 * a time, so that pushes arrive in order (a series' samples must). Failures
 * (no connection, a timeout, 5xx, 429) are tried again after a back-off;
 * a 4xx is the receiver refusing the data, which trying again cannot mend.
 * A kept connection the receiver closed while idle fails the next attempt
 * before any answer: that one goes again at once, without counting.
 * SPDX-License-Identifier: MIT */
#include "remote_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef VOLLEY_SNAPPY
#include <snappy-c.h>
#endif

#include "buf.h"
#include "http.h"
#include "net.h"
#include "url.h"
#include "version.h"
#include "xalloc.h"

/* Protobuf wire types. */
#define PB_VARINT 0
#define PB_FIXED64 1
#define PB_BYTES 2

/* How long the start-up check (--remote-write-strict) waits for a connection. */
#define PROBE_MS 2000

struct push {
    char *data; /* snappy-compressed WriteRequest */
    size_t len;
};

enum rw_state {
    RW_IDLE,       /* nothing on its way */
    RW_CONNECTING, /* a connect in progress */
    RW_SENDING,
    RW_READING, /* the answer */
    RW_BACKOFF, /* waiting to try again */
};

struct remote_write {
    char *url;
    struct url u;
    char *head; /* the request head but Content-Length */
    struct net_addr *addrs;
    size_t naddrs, addr; /* the address tried next */
    struct ev_loop *loop;
    struct push queue[REMOTE_WRITE_QUEUE]; /* from first, n of them, round */
    size_t first, n;
    enum rw_state state;
    int fd;
    bool reused; /* the connection has had an answer before */
    ev_io io;
    ev_timer timer; /* the attempt's deadline, or the back-off */
    double backoff;
    struct buf out; /* the request on its way */
    size_t out_sent;
    struct http_parser parser;
    bool answered; /* bytes of the answer arrived */
    struct remote_write_counts c;
    char last_error[160];
};

/* ---- the encoding ------------------------------------------------------------ */

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void pb_varint(struct buf *b, uint64_t v)
{
    unsigned char bytes[10];
    size_t n = 0;
    while (v >= 0x80) {
        bytes[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    bytes[n++] = (unsigned char)v;
    buf_append(b, bytes, n);
}

static void pb_key(struct buf *b, unsigned field, unsigned wire)
{
    pb_varint(b, (uint64_t)(field << 3 | wire));
}

static void pb_string(struct buf *b, unsigned field, const char *s)
{
    size_t len = strlen(s);
    pb_key(b, field, PB_BYTES);
    pb_varint(b, len);
    buf_append(b, s, len);
}

/* The size of a length-delimited field of len bytes, key included (fields
 * below 16 have one-byte keys). */
static size_t field_len(size_t len) { return 1 + varint_len(len) + len; }

static size_t label_len(const char *name, const char *value)
{
    return field_len(strlen(name)) + field_len(strlen(value));
}

void remote_write_series(struct buf *req, const char *const *names, const char *const *values,
                         size_t n, double value, int64_t ts_ms)
{
    /* Labels sorted by name, as the protocol requires: few, so by insertion. */
    size_t *order = xcalloc(n ? n : 1, sizeof *order);
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && strcmp(names[order[j - 1]], names[i]) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    size_t sample = 1 + 8 + 1 + varint_len((uint64_t)ts_ms), series = field_len(sample);
    for (size_t i = 0; i < n; i++)
        series += field_len(label_len(names[i], values[i]));
    pb_key(req, 1, PB_BYTES);
    pb_varint(req, series);
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        pb_key(req, 1, PB_BYTES);
        pb_varint(req, label_len(names[i], values[i]));
        pb_string(req, 1, names[i]);
        pb_string(req, 2, values[i]);
    }
    pb_key(req, 2, PB_BYTES);
    pb_varint(req, sample);
    pb_key(req, 1, PB_FIXED64);
    uint64_t bits;
    unsigned char le[8];
    memcpy(&bits, &value, sizeof bits);
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(bits >> (8 * i));
    buf_append(req, le, sizeof le);
    pb_key(req, 2, PB_VARINT);
    pb_varint(req, (uint64_t)ts_ms);
    free(order);
}

/* ---- the queue ----------------------------------------------------------------- */

static struct push *at(struct remote_write *rw, size_t i)
{
    return &rw->queue[(rw->first + i) % REMOTE_WRITE_QUEUE];
}

/* Pushes i (from the oldest) leaves the queue. */
static void remove_at(struct remote_write *rw, size_t i)
{
    free(at(rw, i)->data);
    for (size_t k = i; k > 0; k--)
        *at(rw, k) = *at(rw, k - 1);
    rw->first = (rw->first + 1) % REMOTE_WRITE_QUEUE;
    rw->n--;
}

/* Whether the oldest push is on its way (its bytes may be in a socket). */
static bool under_way(const struct remote_write *rw)
{
    return rw->state == RW_CONNECTING || rw->state == RW_SENDING || rw->state == RW_READING;
}

/* ---- the client ------------------------------------------------------------------ */

static void kick(struct remote_write *rw);

static void disconnect(struct remote_write *rw)
{
    ev_io_stop(rw->loop, &rw->io);
    if (rw->fd >= 0)
        close(rw->fd);
    rw->fd = -1;
    rw->reused = false;
}

static void set_timer(struct remote_write *rw, double after)
{
    ev_timer_stop(rw->loop, &rw->timer);
    ev_timer_set(&rw->timer, after, 0.);
    ev_timer_start(rw->loop, &rw->timer);
}

static void watch(struct remote_write *rw, int events)
{
    ev_io_stop(rw->loop, &rw->io);
    ev_io_set(&rw->io, rw->fd, events);
    ev_io_start(rw->loop, &rw->io);
}

/* The attempt failed: closed, counted, and tried again after the back-off.
 * A kept connection that failed before any answer was most likely closed
 * by the receiver while idle: tried again at once on a new one. */
static void failed(struct remote_write *rw, const char *why)
{
    bool stale = rw->reused && !rw->answered;
    disconnect(rw);
    rw->addr = (rw->addr + 1) % rw->naddrs;
    if (stale) {
        rw->state = RW_IDLE;
        kick(rw);
        return;
    }
    rw->c.failed_attempts++;
    snprintf(rw->last_error, sizeof rw->last_error, "%s", why);
    rw->c.last_error = rw->last_error;
    rw->state = RW_BACKOFF;
    set_timer(rw, rw->backoff);
    rw->backoff =
        rw->backoff * 2 > REMOTE_WRITE_BACKOFF_MAX ? REMOTE_WRITE_BACKOFF_MAX : rw->backoff * 2;
}

static void failed_errno(struct remote_write *rw, const char *what, int err)
{
    char why[160];
    snprintf(why, sizeof why, "%s: %s", what, strerror(err));
    failed(rw, why);
}

/* The answer to the oldest push came: it is done with unless the receiver
 * asks for it again (5xx, 429). */
static void answered(struct remote_write *rw)
{
    int status = rw->parser.status;
    char why[64];
    ev_timer_stop(rw->loop, &rw->timer);
    if (status >= 500 || status == 429) {
        snprintf(why, sizeof why, "HTTP %d", status);
        failed(rw, why);
        return;
    }
    if (status >= 200 && status < 300) {
        rw->c.delivered++;
        rw->backoff = REMOTE_WRITE_BACKOFF_MIN;
    } else {
        rw->c.rejected++;
        snprintf(rw->last_error, sizeof rw->last_error, "HTTP %d", status);
        rw->c.last_error = rw->last_error;
    }
    remove_at(rw, 0);
    if (rw->parser.keep_alive) {
        rw->reused = true;
        ev_io_stop(rw->loop, &rw->io);
    } else {
        disconnect(rw);
    }
    rw->state = RW_IDLE;
    kick(rw);
}

static void read_answer(struct remote_write *rw)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(rw->fd, buf, sizeof buf);
        size_t used;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n < 0) {
            failed_errno(rw, "read", errno);
            return;
        }
        enum http_result r =
            n == 0 ? http_eof(&rw->parser) : http_parse(&rw->parser, buf, (size_t)n, &used);
        rw->answered |= n > 0;
        if (r == HTTP_DONE) {
            answered(rw);
            return;
        }
        if (r == HTTP_ERROR || n == 0) {
            failed(rw, n == 0 ? "the receiver closed the connection"
                              : http_error_str(rw->parser.error));
            return;
        }
    }
}

static void send_request(struct remote_write *rw)
{
    while (rw->out_sent < rw->out.len) {
        ssize_t n =
            send(rw->fd, rw->out.data + rw->out_sent, rw->out.len - rw->out_sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            watch(rw, EV_WRITE);
            return;
        }
        if (n < 0) {
            failed_errno(rw, "write", errno);
            return;
        }
        rw->out_sent += (size_t)n;
    }
    rw->state = RW_READING;
    watch(rw, EV_READ);
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    struct remote_write *rw = w->data;
    if (rw->state == RW_CONNECTING) {
        int err = net_connect_error(rw->fd);
        if (err) {
            failed_errno(rw, "connect", err);
            return;
        }
        rw->state = RW_SENDING;
    }
    if (rw->state == RW_SENDING)
        send_request(rw);
    else if (rw->state == RW_READING)
        read_answer(rw);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct remote_write *rw = t->data;
    if (rw->state == RW_BACKOFF) {
        rw->state = RW_IDLE;
        kick(rw);
    } else if (under_way(rw)) {
        rw->reused = false; /* a timeout is no stale connection */
        failed(rw, "no answer in time");
    }
}

/* The oldest push goes, if none is on its way and no back-off is on. */
static void kick(struct remote_write *rw)
{
    if (!rw->loop || rw->state != RW_IDLE || rw->n == 0)
        return;
    const struct push *p = at(rw, 0);
    char length[48];
    buf_clear(&rw->out);
    buf_append(&rw->out, rw->head, strlen(rw->head));
    snprintf(length, sizeof length, "Content-Length: %zu\r\n\r\n", p->len);
    buf_append(&rw->out, length, strlen(length));
    buf_append(&rw->out, p->data, p->len);
    rw->out_sent = 0;
    rw->answered = false;
    http_begin(&rw->parser, false);
    set_timer(rw, REMOTE_WRITE_TIMEOUT);
    if (rw->fd >= 0) {
        rw->state = RW_SENDING;
        send_request(rw);
        return;
    }
    bool in_progress;
    rw->fd = net_connect(&rw->addrs[rw->addr], SOCK_STREAM, &in_progress);
    if (rw->fd < 0) {
        rw->state = RW_CONNECTING; /* so that failed() counts it as an attempt */
        failed_errno(rw, "connect", errno);
        return;
    }
    rw->state = in_progress ? RW_CONNECTING : RW_SENDING;
    if (in_progress)
        watch(rw, EV_WRITE);
    else
        send_request(rw);
}

/* ---- the interface --------------------------------------------------------------- */

#ifdef VOLLEY_SNAPPY
static void compress(const struct buf *req, struct push *p)
{
    size_t len = snappy_max_compressed_length(req->len);
    p->data = xmalloc(len ? len : 1);
    if (snappy_compress(req->data ? req->data : "", req->len, p->data, &len) != SNAPPY_OK)
        die("remote write: snappy could not compress %zu bytes", req->len);
    p->len = len;
}
#else
static void compress(const struct buf *req, struct push *p)
{
    (void)req, (void)p;
    die("remote write: this volley was built without libsnappy");
}
#endif

void remote_write_push(struct remote_write *rw, const struct buf *req, bool final)
{
    size_t keep = under_way(rw) ? 1 : 0; /* the one on its way stays */
    while (rw->n > keep && (final || rw->n == REMOTE_WRITE_QUEUE)) {
        remove_at(rw, keep);
        rw->c.dropped++;
    }
    compress(req, at(rw, rw->n));
    rw->n++;
    rw->c.pushes++;
    kick(rw);
}

bool remote_write_idle(const struct remote_write *rw) { return rw->n == 0; }

void remote_write_stop(struct remote_write *rw)
{
    if (under_way(rw) && rw->loop) {
        snprintf(rw->last_error, sizeof rw->last_error,
                 "no answer yet when volley stopped waiting");
        rw->c.last_error = rw->last_error;
    }
    while (rw->n) {
        remove_at(rw, 0);
        rw->c.dropped++;
    }
    if (rw->loop) {
        disconnect(rw);
        ev_timer_stop(rw->loop, &rw->timer);
    }
    rw->state = RW_IDLE;
    rw->loop = NULL;
}

void remote_write_counts(const struct remote_write *rw, struct remote_write_counts *c)
{
    *c = rw->c;
}

const char *remote_write_url(const struct remote_write *rw) { return rw->url; }

/* With --remote-write-strict, a receiver that takes no connection stops the
 * run before it starts. */
static void probe(const struct remote_write *rw)
{
    int err = ECONNREFUSED;
    for (size_t i = 0; i < rw->naddrs; i++)
        if ((err = net_probe(&rw->addrs[i], PROBE_MS)) == 0)
            return;
    die("--remote-write %s: unable to connect to %s:%s: %s", rw->url, rw->u.host, rw->u.service,
        strerror(err));
}

struct remote_write *remote_write_new(const char *url, bool strict)
{
    struct remote_write *rw = xcalloc(1, sizeof *rw);
    const char *why;
    rw->url = xstrdup(url);
    rw->fd = -1;
    rw->backoff = REMOTE_WRITE_BACKOFF_MIN;
    if (!url_parse(url, &rw->u, &why))
        die("invalid --remote-write URL '%s': %s", url, why);
    if (!net_lookup(rw->u.host, rw->u.service, &rw->addrs, &rw->naddrs, &why))
        die("--remote-write %s: unable to resolve %s: %s", url, rw->u.host, why);
    if (rw->naddrs == 0)
        die("--remote-write %s: unable to resolve %s: no address", url, rw->u.host);
    if (strict)
        probe(rw);
    char *host = url_host_header(&rw->u);
    size_t len = strlen(rw->u.path) + strlen(host) + 256;
    rw->head = xmalloc(len);
    snprintf(rw->head, len,
             "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: volley/%s\r\n"
             "Content-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\n"
             "X-Prometheus-Remote-Write-Version: 0.1.0\r\n",
             rw->u.path, host, VOLLEY_VERSION);
    free(host);
    http_parser_init(&rw->parser);
    return rw;
}

void remote_write_start(struct remote_write *rw, struct ev_loop *loop)
{
    rw->loop = loop;
    ev_io_init(&rw->io, on_io, 0, EV_READ);
    rw->io.data = rw;
    ev_timer_init(&rw->timer, on_timer, 0., 0.);
    rw->timer.data = rw;
    kick(rw);
}

void remote_write_free(struct remote_write *rw)
{
    if (!rw)
        return;
    remote_write_stop(rw);
    http_parser_free(&rw->parser);
    buf_free(&rw->out);
    free(rw->addrs);
    free(rw->head);
    url_free(&rw->u);
    free(rw->url);
    free(rw);
}
