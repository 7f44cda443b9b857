/* The connection state machine. The read watcher stays armed for the life of
 * a socket; when the last response of a batch arrives the next batch is written
 * right there, and the write watcher is armed only if that write would block.
 * One timer per connection serves, by state, as the connect timeout, the
 * response timeout, the reconnect back-off and the delay() pause.
 * SPDX-License-Identifier: MIT */
#include "conn.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "net.h"
#include "stats.h"
#include "transport.h"
#include "worker.h"

/* Reconnecting after a failed connect waits 1 ms, doubling up to 1 s, so a
 * dead target costs no CPU and the error counts stay meaningful. */
#define BACKOFF_MIN_US 1000
#define BACKOFF_MAX_US 1000000
/* delay() may ask for any number of milliseconds; this is far past any run. */
#define DELAY_MAX_MS 1000000000000ULL

static void on_read(struct ev_loop *loop, ev_io *io, int revents);
static void on_write(struct ev_loop *loop, ev_io *io, int revents);
static void on_timer(struct ev_loop *loop, ev_timer *t, int revents);
static void next_batch(struct conn *c);
static void dispatch(struct conn *c);

void conn_init(struct conn *c, struct worker *w)
{
    memset(c, 0, sizeof *c);
    c->worker = w;
    c->fd = -1;
    c->state = CONN_CLOSED;
    ev_init(&c->rio, on_read);
    ev_init(&c->wio, on_write);
    ev_init(&c->timer, on_timer);
    c->rio.data = c->wio.data = c->timer.data = c;
    http_parser_init(&c->parser);
    c->parser.cache = &w->head_cache;
}

void conn_free(struct conn *c)
{
    conn_stop(c);
    c->worker->transport->release(c);
    http_parser_free(&c->parser);
    request_free(&c->own);
}

static void timer_start(struct conn *c, uint64_t us)
{
    struct ev_loop *loop = c->worker->loop;
    ev_timer_stop(loop, &c->timer);
    ev_timer_set(&c->timer, (double)us / 1e6, 0.);
    ev_timer_start(loop, &c->timer);
}

/* ------------------------------------------------------------------------ */
/* Closing, reconnecting and counting errors                                 */
/* ------------------------------------------------------------------------ */

static void drop(struct conn *c)
{
    struct ev_loop *loop = c->worker->loop;
    ev_io_stop(loop, &c->rio);
    ev_io_stop(loop, &c->wio);
    ev_timer_stop(loop, &c->timer);
    schedule_remove(&c->worker->schedule, c);
    if (c->fd >= 0) {
        c->worker->transport->close(c);
        close(c->fd);
        c->fd = -1;
    }
    c->state = CONN_CLOSED;
    c->batch = NULL;
    c->pending = 0;
}

void conn_stop(struct conn *c) { drop(c); }

/* Reopen at once after a normal close, or after a growing pause when
 * connecting failed. Requests still outstanding end here, as errors. */
static void reconnect(struct conn *c, bool backoff)
{
    if (c->worker->budget && c->state == CONN_ACTIVE)
        budget_resolve(c->worker->budget, c->pending);
    drop(c);
    if (c->worker->stopping)
        return;
    if (!backoff) {
        conn_start(c);
        return;
    }
    c->backoff_us = c->backoff_us ? c->backoff_us * 2 : BACKOFF_MIN_US;
    if (c->backoff_us > BACKOFF_MAX_US)
        c->backoff_us = BACKOFF_MAX_US;
    timer_start(c, c->backoff_us);
}

static void count(struct conn *c, uint64_t *class, enum cause cause, uint64_t n)
{
    *class += n;
    c->worker->stats.causes[cause] += n;
}

static void connect_failed(struct conn *c, enum cause cause)
{
    count(c, &c->worker->stats.errors.connect, cause, 1);
    reconnect(c, true);
}

static enum cause connect_cause(int err)
{
    switch (err) {
    case ECONNREFUSED:
    case ENOENT: /* a Unix socket path that is gone */
        return CAUSE_REFUSED;
    case ENETUNREACH:
    case EHOSTUNREACH:
    case EADDRNOTAVAIL:
        return CAUSE_UNREACHABLE;
    case ETIMEDOUT:
        return CAUSE_CONNECT_TIMEOUT;
    case EMFILE:
    case ENFILE:
        return CAUSE_FD_LIMIT;
    default:
        return CAUSE_CONNECT_OTHER;
    }
}

static void read_failed(struct conn *c, enum cause cause)
{
    count(c, &c->worker->stats.errors.read, cause, 1);
    reconnect(c, false);
}

static void write_failed(struct conn *c, int err)
{
    enum cause cause = err == EPIPE        ? CAUSE_BROKEN_PIPE
                       : err == ECONNRESET ? CAUSE_RESET
                                           : CAUSE_WRITE_OTHER;
    count(c, &c->worker->stats.errors.write, cause, 1);
    reconnect(c, false);
}

/* ------------------------------------------------------------------------ */
/* Connecting                                                                 */
/* ------------------------------------------------------------------------ */

static void ready(struct conn *c)
{
    struct ev_loop *loop = c->worker->loop;
    ev_timer_stop(loop, &c->timer);
    ev_io_stop(loop, &c->wio);
    ev_io_start(loop, &c->rio);
    c->worker->stats.connects++;
    c->state = CONN_IDLE;
    next_batch(c);
}

static void handshake(struct conn *c)
{
    struct ev_loop *loop = c->worker->loop;
    switch (c->worker->transport->handshake(c)) {
    case IO_OK:
        ready(c);
        break;
    case IO_WANT_READ:
        ev_io_stop(loop, &c->wio);
        ev_io_start(loop, &c->rio);
        break;
    case IO_WANT_WRITE:
        ev_io_start(loop, &c->wio);
        break;
    default:
        connect_failed(c, CAUSE_TLS_HANDSHAKE);
        break;
    }
}

static void connected(struct conn *c)
{
    c->state = CONN_HANDSHAKE;
    handshake(c);
}

void conn_start(struct conn *c)
{
    struct worker *w = c->worker;
    bool in_progress;
    int fd = net_connect(&w->addr, &in_progress);
    if (fd < 0) {
        connect_failed(c, connect_cause(errno));
        return;
    }
    c->fd = fd;
    ev_io_set(&c->rio, fd, EV_READ);
    ev_io_set(&c->wio, fd, EV_WRITE);
    c->parser.want_head = w->hooks.head;
    c->parser.want_body = w->hooks.body;
    http_begin(&c->parser, false);
    /* Connecting and the handshake are bounded by --timeout too. */
    timer_start(c, w->cfg->timeout_us);
    if (!in_progress) {
        connected(c);
        return;
    }
    c->state = CONN_CONNECTING;
    ev_io_start(w->loop, &c->wio);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                    */
/* ------------------------------------------------------------------------ */

static void write_batch(struct conn *c)
{
    const struct request *r = c->batch;
    while (c->written < c->batch_len) {
        ssize_t n = c->worker->transport->write(c, r->data + c->written, c->batch_len - c->written);
        if (n > 0) {
            c->written += (size_t)n;
        } else if (n == IO_WANT_WRITE || n == IO_WANT_READ) {
            /* The read watcher is always armed, so a TLS write that needs
             * the peer's data resumes from on_write once data arrived too. */
            ev_io_start(c->worker->loop, &c->wio);
            return;
        } else {
            write_failed(c, errno);
            return;
        }
    }
    ev_io_stop(c->worker->loop, &c->wio);
}

static void send_batch(struct conn *c)
{
    struct worker *w = c->worker;
    size_t depth = worker_depth(w);
    /* Claim before request() runs, so that scripts see only requests sent. */
    if (w->budget && (depth = budget_claim(w->budget, depth)) == 0)
        return;
    const struct request *r = worker_request(w, &c->own, depth);
    if (!r) {
        if (!w->stopping)
            conn_stop(c); /* request() returned nil: this connection is done */
        return;
    }
    c->batch = r;
    c->batch_depth = depth;
    c->batch_len = request_prefix(r, depth);
    c->written = 0;
    c->pending = depth;
    c->state = CONN_ACTIVE;
    http_begin(&c->parser, request_is_head(r, 0));
    c->sent_at = c->start_at = clock_us();
    w->stats.sent += depth;
    if (w->cfg->rate) {
        /* Latency counts from the intended time, however late the send. */
        c->start_at = c->due;
        hist_record(w->stats.lag, c->sent_at - c->due);
        c->batches++;
    }
    /* The response timer keeps the deadline of an earlier batch when it is
     * still running: on_timer moves it on, so the common case costs nothing. */
    if (!ev_is_active(&c->timer))
        timer_start(c, w->cfg->timeout_us);
    write_batch(c);
}

/* What comes after a connect or a completed batch: the next batch, after
 * the pause delay() asks for if the script has one. */
static void next_batch(struct conn *c)
{
    struct worker *w = c->worker;
    c->state = CONN_IDLE;
    if (w->stopping)
        return;
    double ms = 0;
    if (c->delay_until || worker_delay(w, &ms)) {
        uint64_t now = clock_us();
        /* A pause cut short by a reconnect (a server closing the idle
         * connection) is served out, not asked for again: starting it over
         * on every reconnect would never let a request out when the server
         * closes idle connections sooner than delay() says. */
        if (w->stopping)
            return;
        if (!c->delay_until) {
            /* Converting a delay past the range of uint64_t (1e300, inf)
             * is undefined and in practice gave no delay at all. */
            c->delay_until =
                now + (ms < DELAY_MAX_MS ? (uint64_t)(ms * 1000) : DELAY_MAX_MS * 1000);
        }
        if (c->delay_until > now) {
            timer_start(c, c->delay_until - now);
            return;
        }
        c->delay_until = 0;
    }
    dispatch(c);
}

/* With -R, a batch waits for its intended time: connection g of C sends
 * batch k at start + (g + k C) * interval, so the whole run sends at an even
 * pace whatever C and the thread count. A connection that fell behind sends
 * at once, and its latency still counts from the intended time. */
static void dispatch(struct conn *c)
{
    struct worker *w = c->worker;
    if (w->cfg->rate) {
        double slot = (double)(w->first_conn + (size_t)(c - w->conns)) +
                      (double)c->batches * (double)w->cfg->connections;
        c->due = w->rate_start + (uint64_t)(slot * w->batch_interval_us);
        if (c->due > clock_us()) {
            schedule_add(&w->schedule, c);
            return;
        }
    }
    send_batch(c);
}

void conn_due(struct conn *c)
{
    if (c->state == CONN_IDLE && !c->worker->stopping)
        send_batch(c);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                    */
/* ------------------------------------------------------------------------ */

/* A final response arrived. Returns false when the connection was closed
 * or the worker is stopping. */
static bool response_done(struct conn *c, uint64_t now)
{
    struct worker *w = c->worker;
    struct stats *s = &w->stats;
    int status = c->parser.status;
    s->requests++;
    s->status[status > 0 && status < STATS_STATUS_MAX ? status : 0]++;
    if (status > 399)
        s->errors.status++;
    hist_record(s->latency, now - c->start_at);
    if (w->cfg->rate)
        hist_record(s->u_latency, now - c->sent_at);
    c->pending--;
    c->backoff_us = 0;
    if (w->budget)
        budget_resolve(w->budget, 1);
    if (!worker_response(w, &c->parser))
        return false;
    if (!c->parser.keep_alive || (w->cfg->no_keepalive && !c->pending)) {
        /* Requests pipelined behind a closing response were never read by
         * the server: under -n they go out again on the next connection. */
        if (w->budget)
            budget_return(w->budget, c->pending);
        c->pending = 0;
        s->reconnects++;
        reconnect(c, false);
        return false;
    }
    if (c->pending)
        http_begin(&c->parser, request_is_head(c->batch, c->batch_depth - c->pending));
    return true;
}

static enum cause parse_cause(const struct http_parser *p)
{
    switch (p->error) {
    case HTTP_ERR_HEAD_TOO_LARGE:
        return CAUSE_HEAD_TOO_LARGE;
    case HTTP_ERR_TRUNCATED:
        return CAUSE_TRUNCATED;
    default:
        return CAUSE_PARSE;
    }
}

/* Feed what one read returned to the parser. Returns whether to go on
 * reading: not when the connection was closed, a new batch went out (its
 * answer cannot be in this read) or the worker is stopping. */
static bool consume(struct conn *c, const char *buf, size_t len)
{
    uint64_t now = clock_us();
    size_t off = 0;
    while (off < len) {
        if (c->state != CONN_ACTIVE || c->pending == 0) {
            /* Bytes nobody asked for: they cannot answer a later request. */
            read_failed(c, CAUSE_UNEXPECTED);
            return false;
        }
        size_t used;
        enum http_result r = http_parse(&c->parser, buf + off, len - off, &used);
        off += used;
        if (r == HTTP_MORE)
            break;
        if (r == HTTP_ERROR) {
            read_failed(c, parse_cause(&c->parser));
            return false;
        }
        if (!response_done(c, now))
            return false;
        if (c->pending == 0 && off == len) {
            next_batch(c);
            return false;
        }
    }
    return !c->worker->stopping;
}

static void on_eof(struct conn *c)
{
    switch (http_eof(&c->parser)) {
    case HTTP_DONE: /* a body delimited by the close: a complete response */
        response_done(c, clock_us());
        break;
    case HTTP_MORE:
        if (c->state == CONN_ACTIVE && c->pending) {
            read_failed(c, CAUSE_CLOSED);
        } else { /* the server closed an idle keep-alive connection */
            c->worker->stats.reconnects++;
            reconnect(c, false);
        }
        break;
    default:
        read_failed(c, parse_cause(&c->parser));
        break;
    }
}

static void read_ready(struct conn *c)
{
    struct worker *w = c->worker;
    for (;;) {
        ssize_t n = w->transport->read(c, w->buf, w->buf_len);
        if (n > 0) {
            w->stats.bytes += (uint64_t)n;
            if (!consume(c, w->buf, (size_t)n))
                return;
            /* A short read drained the socket; a full one may have left more. */
            if ((size_t)n < w->buf_len && !w->transport->pending(c))
                return;
        } else if (n == 0) {
            on_eof(c);
            return;
        } else if (n == IO_WANT_READ || n == IO_WANT_WRITE) {
            return;
        } else {
            read_failed(c, errno == ECONNRESET ? CAUSE_RESET : CAUSE_READ_OTHER);
            return;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Watcher callbacks                                                          */
/* ------------------------------------------------------------------------ */

/* Once the worker is stopping (the end of the run, or thread:stop() from a
 * hook), the watchers still pending in the same loop iteration do nothing:
 * a response read after the stop is not counted nor given to response(). */
static void on_read(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop, (void)revents;
    struct conn *c = io->data;
    if (c->worker->stopping)
        return;
    if (c->state == CONN_HANDSHAKE)
        handshake(c);
    else
        read_ready(c);
}

static void on_write(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)revents;
    struct conn *c = io->data;
    if (c->worker->stopping)
        return;
    switch (c->state) {
    case CONN_CONNECTING: {
        int err = net_connect_error(c->fd);
        if (err)
            connect_failed(c, connect_cause(err));
        else
            connected(c);
        break;
    }
    case CONN_HANDSHAKE:
        handshake(c);
        break;
    case CONN_ACTIVE:
        write_batch(c);
        break;
    default:
        ev_io_stop(loop, io);
        break;
    }
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct conn *c = t->data;
    if (c->worker->stopping)
        return;
    switch (c->state) {
    case CONN_CLOSED: /* the back-off is over */
        conn_start(c);
        break;
    case CONN_CONNECTING:
    case CONN_HANDSHAKE:
        connect_failed(c, CAUSE_CONNECT_TIMEOUT);
        break;
    case CONN_ACTIVE: {
        uint64_t now = clock_us(), deadline = c->sent_at + c->worker->cfg->timeout_us;
        if (now < deadline) {
            timer_start(c, deadline - now);
        } else {
            /* Every request still unanswered has timed out. */
            count(c, &c->worker->stats.errors.timeout, CAUSE_RESPONSE_TIMEOUT, c->pending);
            reconnect(c, false);
        }
        break;
    }
    case CONN_IDLE:
        if (c->delay_until) {
            c->delay_until = 0;
            dispatch(c);
        }
        break;
    }
}
