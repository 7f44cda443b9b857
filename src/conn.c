/* The connection machine. A slot is closed, connecting, in its transport's
 * handshake, or open; once open, its protocol session says whether it can
 * take a batch, and pump() decides when one goes: after the script's delay()
 * pause, at the intended time under -R, on a connection that is open (a slot
 * closed while idle reopens only when it has a batch to send). The read
 * watcher stays armed for the life of a socket; a batch is written at once,
 * from the read path when the previous one completed, and the write watcher
 * is armed only when a write would block. One timer per slot serves, by
 * state, as the connect timeout, the response timeout, the back-off after a
 * failure and the delay() pause.
 * SPDX-License-Identifier: MIT */
#include "conn.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "clock.h"
#include "h1.h"
#include "hist.h"
#include "net.h"
#include "protocols.h"
#include "route.h"

/* After a failure (a connect that failed, a connection that ended in an
 * error before its first response, requests the server refused unprocessed)
 * the slot waits 1 ms, doubling up to 1 s until a response comes, so a dead
 * or hostile target costs no CPU and the counts stay meaningful. */
#define BACKOFF_MIN_US 1000
#define BACKOFF_MAX_US 1000000
/* A request the server refused unprocessed is sent again at most this many
 * times in a row, for each request a connection may have in flight: past
 * that, with no response between, a refusal is an error. */
#define RESENDS 3
/* delay() may ask for any number of milliseconds; this is far past any run. */
#define DELAY_MAX_MS 1e12
/* What one connection may read in one event before the loop serves the
 * others, the -R schedule and the timers (the watcher is level-triggered,
 * so the rest is read on the next turn). */
#define READ_BURST (256 * 1024)

static void on_read(struct ev_loop *loop, ev_io *io, int revents);
static void on_write(struct ev_loop *loop, ev_io *io, int revents);
static void on_timer(struct ev_loop *loop, ev_timer *t, int revents);
static bool pump(struct conn *c);
static void flush(struct conn *c);
static void open_socket(struct conn *c);
static void on_wake(struct sock *s);

static bool on_response(void *arg, const struct proto_response *r);
static void on_failed(void *arg, enum cause cause);
static void on_unsent(void *arg, enum cause cause);
static void on_refused(void *arg);
static void on_returned(void *arg, size_t n);

/* Where a connection's sessions end their requests (with the connection). */
static const struct proto_sink sink = {on_response, on_failed, on_unsent, on_refused, on_returned};

/* Whether the connection runs on the worker's io_uring rather than on
 * readiness through its loop. */
static inline bool ringed(const struct conn *c) { return c->link.ring != NULL; }

void conn_init(struct conn *c, const struct conn_config *cfg, struct conn_live *live, size_t index)
{
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->live = live;
    c->index = index;
    c->sock.fd = -1;
    c->state = CONN_CLOSED;
    ev_init(&c->rio, on_read);
    ev_init(&c->wio, on_write);
    ev_init(&c->timer, on_timer);
    c->rio.data = c->wio.data = c->timer.data = c;
    c->sock.loop = cfg->loop;
    c->sock.stats = cfg->stats;
    c->sock.wake = on_wake;
}

static void timer_start(struct conn *c, uint64_t us)
{
    struct ev_loop *loop = c->cfg->loop;
    ev_timer_stop(loop, &c->timer);
    ev_timer_set(&c->timer, (double)us / 1e6, 0.);
    ev_timer_start(loop, &c->timer);
}

/* The slot was opened, or failed to open, for the first time. */
static void settle(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    if (c->settled)
        return;
    c->settled = true;
    if (--c->live->unsettled == 0 && cfg->hooks.settled)
        cfg->hooks.settled(cfg->hooks.arg);
}

/* Close the socket. Requests in flight must have been accounted for. */
static void drop(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    ev_io_stop(cfg->loop, &c->rio);
    ev_io_stop(cfg->loop, &c->wio);
    ev_timer_stop(cfg->loop, &c->timer);
    if (c->state == CONN_OPEN) {
        c->proto->abort(c->session);
        c->live->open--;
    }
    if (c->sock.fd >= 0) {
        cfg->transport->close(&c->sock);
        if (ringed(c))
            uring_close(&c->link);
        else
            close(c->sock.fd);
        c->sock.fd = -1;
    }
    c->state = CONN_CLOSED;
    c->read_wants_write = c->write_wants_read = false;
}

void conn_stop(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    if (cfg->budget && c->state == CONN_OPEN)
        budget_return(cfg->budget, c->proto->inflight(c->session));
    if (cfg->budget && c->claimed)
        budget_return(cfg->budget, c->claimed);
    c->claimed = 0;
    drop(c);
    if (cfg->pace)
        schedule_remove(&cfg->pace->schedule, &c->turn);
}

void conn_free(struct conn *c)
{
    conn_stop(c);
    c->cfg->transport->release(&c->sock);
    for (size_t i = 0; i < c->cfg->nprotocols; i++)
        if (c->sessions[i])
            c->cfg->protocols[i]->destroy(c->sessions[i]);
    request_free(&c->own);
}

/* ------------------------------------------------------------------------ */
/* Outcomes: responses, errors, closes                                        */
/* ------------------------------------------------------------------------ */

/* Recording one value n times costs what recording it once does, and a
 * pipelined batch's responses often arrive in one read, with one time. */
static void record(struct hist *h, uint64_t value, uint64_t n)
{
    if (n == 1)
        hist_record(h, value);
    else
        hist_record_n(h, value, n);
}

void conn_record(const struct conn_config *cfg, struct conn_live *live)
{
    struct conn_tally *t = &live->tally;
    struct stats *s = cfg->stats;
    if (!t->n)
        return;
    record(s->latency, t->done_at - t->start_at, t->n);
    record(s->ttfb, t->first_at > t->start_at ? t->first_at - t->start_at : 0, t->n);
    /* the uncorrected figures differ from the others only under -R */
    if (cfg->pace) {
        record(s->u_latency, t->done_at - t->sent_at, t->n);
        record(s->u_ttfb, t->first_at > t->sent_at ? t->first_at - t->sent_at : 0, t->n);
    }
    t->n = 0;
}

/* The session's sink: a final response, counted, handed to response(). */
static bool on_response(void *arg, const struct proto_response *r)
{
    struct conn *c = arg;
    const struct conn_config *cfg = c->cfg;
    struct stats *s = cfg->stats;
    int status = r->status;
    s->requests++;
    s->status[status > 0 && status < STATS_STATUS_MAX ? status : 0]++;
    if (status > 399)
        s->errors.status++;
    struct conn_tally *t = &c->live->tally;
    if (t->n && (t->done_at != r->done_at || t->first_at != r->first_at ||
                 t->start_at != r->start_at || t->sent_at != r->sent_at))
        conn_record(cfg, c->live);
    t->start_at = r->start_at;
    t->sent_at = r->sent_at;
    t->first_at = r->first_at;
    t->done_at = r->done_at;
    t->n++;
    c->backoff_us = 0;
    c->retry_at = 0;
    c->refusals = 0;
    if (cfg->budget)
        budget_resolve(cfg->budget, 1);
    if (cfg->hooks.response) {
        cfg->hooks.response(cfg->hooks.arg, r);
        if (c->live->stopping)
            return false;
    }
    return true;
}

/* The session's sink: requests it will not have answered here, though the
 * server did nothing wrong. */
static void on_returned(void *arg, size_t n)
{
    struct conn *c = arg;
    if (c->cfg->budget && n)
        budget_return(c->cfg->budget, n);
}

/* An error, counted in its class once per request it ended, so that the
 * responses and the errors of a -n run add up to N and each is one attempt;
 * and under its cause at least once, so that an error that ended no request
 * (a connection that failed with nothing in flight) is still seen. */
static void count(struct conn *c, uint64_t *class, enum cause cause, uint64_t n)
{
    *class += n;
    c->cfg->stats->causes[cause] += n ? n : 1;
}

/* The next pause after a failure: 1 ms, doubling up to 1 s, until a
 * response comes. */
static uint64_t back_off(struct conn *c)
{
    c->backoff_us = c->backoff_us ? c->backoff_us * 2 : BACKOFF_MIN_US;
    if (c->backoff_us > BACKOFF_MAX_US)
        c->backoff_us = BACKOFF_MAX_US;
    return c->backoff_us;
}

/* A session ended requests of an open connection without an answer: the
 * next batch goes on the loop's next turn (the session may have ended them
 * while writing, with nothing coming to read), or, with backoff, once the
 * back-off is over. Requests ended together back off once. */
static void pump_later(struct conn *c, bool backoff)
{
    uint64_t now = clock_us();
    if (backoff && c->retry_at <= now)
        c->retry_at = now + back_off(c);
    timer_start(c, 0);
}

static void request_failed(struct conn *c, uint64_t *class, enum cause cause)
{
    const struct conn_config *cfg = c->cfg;
    count(c, class, cause, 1);
    if (cfg->budget)
        budget_resolve(cfg->budget, 1);
}

/* The session's sink: one request failed while the connection goes on. */
static void on_failed(void *arg, enum cause cause)
{
    struct conn *c = arg;
    request_failed(c, &c->cfg->stats->errors.read, cause);
}

/* The session's sink: one request could not be sent. Under -n the error is
 * the request's outcome, and the next request need not wait; otherwise
 * requests that cannot be sent back off, so that they cost no CPU. */
static void on_unsent(void *arg, enum cause cause)
{
    struct conn *c = arg;
    request_failed(c, &c->cfg->stats->errors.write, cause);
    pump_later(c, !c->cfg->budget);
}

/* The session's sink: the server refused one request unprocessed. A server
 * that is draining or briefly overloaded refuses a few requests, which go
 * again after the back-off; one that refuses everything (or sends GOAWAY on
 * every connection) would be sent the same requests forever: past RESENDS
 * per stream with no response between, a refusal is an error. */
static void on_refused(void *arg)
{
    struct conn *c = arg;
    const struct conn_config *cfg = c->cfg;
    const struct proto_conf *conf = &cfg->sessions[c->protocol];
    size_t most = conf->streams > conf->depth ? conf->streams : conf->depth;
    if (c->refusals++ < RESENDS * most) {
        on_returned(c, 1);
        pump_later(c, true);
    } else {
        request_failed(c, &cfg->stats->errors.read, CAUSE_REFUSED_STREAM);
        pump_later(c, !cfg->budget);
    }
}

/* After a failure: try again after the back-off, or else on the next turn
 * of the loop (never from inside the call that failed: a target that fails
 * at once would recurse). The slot reopens then if it has a batch to send. */
static void retry(struct conn *c, bool backoff)
{
    uint64_t wait = backoff ? back_off(c) : 0;
    c->retry_at = clock_us() + wait;
    timer_start(c, wait);
}

/* The connection ended normally: the response said so, it ended a body
 * delimited by the close, or the server closed it while it was idle. */
static void closed(struct conn *c)
{
    c->cfg->stats->reconnects++;
    drop(c);
    pump(c);
}

/* The open connection failed. Every request in flight on it ends here, as
 * one error each (with none in flight, the error is counted under its cause
 * only). One that failed before it carried a request backs off like a
 * failed connect. */
static void failed(struct conn *c, uint64_t *class, enum cause cause)
{
    const struct conn_config *cfg = c->cfg;
    size_t n = c->proto->inflight(c->session);
    count(c, class, cause, n);
    if (cfg->budget && n)
        budget_resolve(cfg->budget, n);
    bool backoff = !c->carried;
    drop(c);
    retry(c, backoff);
}

/* Why the transport failed: what it says (QUIC), or what errno says. */
static enum cause transport_cause(struct conn *c, enum cause by_errno)
{
    const struct transport *t = c->cfg->transport;
    return t->cause ? t->cause(&c->sock) : by_errno;
}

void conn_write_failed(struct conn *c, int err)
{
    enum cause cause = err == EPIPE        ? CAUSE_BROKEN_PIPE
                       : err == ECONNRESET ? CAUSE_RESET
                                           : CAUSE_WRITE_OTHER;
    failed(c, &c->cfg->stats->errors.write, transport_cause(c, cause));
}

/* Connecting failed. When a batch was waiting for the connection, that is
 * an attempt that failed (a connection opened ahead of its first batch, as
 * -R opens them, ends no request); under -n, the outcome of one of its
 * requests, and the next attempt (for the next request) need not wait:
 * every attempt brings the run nearer its end, so a run against a target
 * that cannot be reached ends. Otherwise attempts back off, so a dead
 * target costs no CPU and the counts stay meaningful. */
void conn_connect_failed(struct conn *c, enum cause cause)
{
    const struct conn_config *cfg = c->cfg;
    count(c, &cfg->stats->errors.connect, cause, c->want ? 1 : 0);
    route_count(cfg->route, cfg->by_source, cfg->first + c->index, false);
    bool outcome = c->claimed;
    if (outcome)
        budget_resolve(cfg->budget, c->claimed);
    c->claimed = 0;
    c->want = false;
    settle(c);
    drop(c);
    retry(c, !outcome);
}

static void timed_out(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    size_t n = c->proto->inflight(c->session);
    enum cause cause = c->proto->expired(c->session);
    /* Every request still unanswered has timed out. A connection whose
     * set-up never completed (HTTP/2's SETTINGS) fails even with none: an
     * error that ended no request. */
    count(c, &cfg->stats->errors.timeout, cause, n);
    if (cfg->budget && n)
        budget_resolve(cfg->budget, n);
    drop(c);
    retry(c, false);
}

/* ------------------------------------------------------------------------ */
/* Connecting                                                                 */
/* ------------------------------------------------------------------------ */

/* The protocol the connection speaks now: the one its server chose in
 * ALPN, HTTP/1.1 when it chose none (or the first offered, when that is
 * not among them), the one there is over cleartext. */
static size_t chosen(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    size_t len;
    const char *id = cfg->transport->alpn(&c->sock, &len);
    for (size_t i = 0; i < cfg->nprotocols; i++) {
        const struct proto_ops *p = cfg->protocols[i];
        if (id ? strlen(p->alpn) == len && memcmp(p->alpn, id, len) == 0 : p == &proto_h1)
            return i;
    }
    return 0; /* what the server then sends shows as that protocol's errors */
}

/* Its session for the protocol it speaks: made the first time. */
static void speak(struct conn *c, size_t protocol)
{
    const struct conn_config *cfg = c->cfg;
    c->protocol = protocol;
    c->proto = cfg->protocols[protocol];
    if (!c->sessions[protocol])
        c->sessions[protocol] = c->proto->create(&cfg->sessions[protocol], &sink, c);
    c->session = c->sessions[protocol];
    cfg->stats->by_protocol[protocols_index(c->proto)]++;
}

static void ready(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    struct stats *s = cfg->stats;
    uint64_t now = clock_us();
    ev_timer_stop(cfg->loop, &c->timer);
    if (ringed(c)) {
        uring_receive(&c->link);
    } else {
        ev_io_stop(cfg->loop, &c->wio);
        ev_io_start(cfg->loop, &c->rio);
    }
    s->connects++;
    if (c->opened)
        s->reopened++;
    route_count(cfg->route, cfg->by_source, cfg->first + c->index, true);
    hist_record(s->connect, now - c->connect_at);
    if (cfg->transport->secure) {
        s->handshakes++;
        s->resumed += cfg->transport->resumed(&c->sock) ? 1 : 0;
        s->handshake_us += now - c->connected_at;
    }
    speak(c, chosen(c));
    c->state = CONN_OPEN;
    c->live->open++;
    c->opened = true;
    c->carried = false;
    c->want = false;
    c->available_at = now;
    c->proto->open(c->session, &c->sock);
    settle(c);
    flush(c); /* what the protocol says first (HTTP/2's preface) */
    if (c->state == CONN_OPEN)
        pump(c);
}

/* The handshake failed: why, for a TLS one (QUIC's may fail otherwise,
 * as a version negotiation does). */
static void handshake_failed(struct conn *c)
{
    enum cause cause = transport_cause(c, CAUSE_TLS_HANDSHAKE);
    if (cause == CAUSE_TLS_HANDSHAKE && c->cfg->transport->failure)
        c->cfg->stats->tls_failures[c->cfg->transport->failure(&c->sock)]++;
    conn_connect_failed(c, cause);
}

void conn_await(struct conn *c, int want)
{
    if (want == IO_WANT_READ)
        ev_io_stop(c->cfg->loop, &c->wio);
    ev_io_start(c->cfg->loop, want == IO_WANT_READ ? &c->rio : &c->wio);
}

void conn_handshake(struct conn *c)
{
    c->state = CONN_HANDSHAKE;
    int rc = c->cfg->transport->handshake(&c->sock);
    if (rc == IO_OK)
        ready(c);
    else if (rc == IO_WANT_READ || rc == IO_WANT_WRITE)
        conn_await(c, rc);
    else
        handshake_failed(c);
}

/* Connected: through a proxy, its tunnel first (cfg->tunnel), which goes
 * on to the handshake. */
static void connected(struct conn *c)
{
    c->connected_at = clock_us();
    if (!c->cfg->tunnel) {
        conn_handshake(c);
        return;
    }
    c->state = CONN_TUNNEL;
    tunnel_begin(&c->tunnel);
    c->cfg->tunnel(c);
}

void conn_connect_done(struct conn *c, int err)
{
    const struct conn_config *cfg = c->cfg;
    uint64_t g = cfg->first + c->index;
    if (err)
        conn_connect_failed(c, route_connect_cause(cfg->route, cfg->ports, g, err));
    else
        connected(c);
}

static void open_socket(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    bool in_progress;
    int type = cfg->transport->datagram ? SOCK_DGRAM : SOCK_STREAM;
    enum cause cause;
    c->connect_at = clock_us();
    int fd = route_open(cfg->route, cfg->ports, cfg->first + c->index, type, &in_progress, &cause);
    if (fd < 0) {
        conn_connect_failed(c, cause);
        return;
    }
    c->sock.fd = fd;
    ev_io_set(&c->rio, fd, EV_READ);
    ev_io_set(&c->wio, fd, EV_WRITE);
    /* Connecting and the handshake are bounded by --timeout too. */
    timer_start(c, cfg->timeout_us);
    /* On io_uring the ring takes the socket, connected already or not. */
    bool ring = ringed(c);
    if (!in_progress && !ring) {
        connected(c);
        return;
    }
    c->state = CONN_CONNECTING;
    if (ring)
        uring_connect(&c->link, fd);
    else
        ev_io_start(cfg->loop, &c->wio);
}

void conn_start(struct conn *c, bool want)
{
    const struct conn_config *cfg = c->cfg;
    c->want = want;
    /* Under -n the request waiting for the connection is claimed now: if the
     * connection cannot be made, that is its outcome. */
    if (want && cfg->budget && !c->claimed) {
        if (!budget_claim(cfg->budget, 1)) {
            c->want = false;
            settle(c);
            return;
        }
        c->claimed = 1;
    }
    open_socket(c);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                    */
/* ------------------------------------------------------------------------ */

/* Write what the session has to send, until it is all out or the socket
 * would block. */
static void flush(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    const char *data;
    size_t len;
    if (ringed(c)) {
        uring_send(&c->link); /* with the turn's other sends */
        return;
    }
    if (c->write_wants_read)
        return; /* on_read resumes it */
    while ((len = c->proto->output(c->session, &data)) > 0) {
        ssize_t n = cfg->transport->write(&c->sock, data, len);
        if (n > 0) {
            conn_sent(c, (size_t)n);
        } else if (n == IO_WANT_WRITE) {
            ev_io_start(cfg->loop, &c->wio);
            return;
        } else if (n == IO_WANT_READ) {
            /* TLS: the write needs the peer's data first. The read watcher
             * is always armed; the write watcher would only spin. */
            c->write_wants_read = true;
            if (!c->read_wants_write)
                ev_io_stop(cfg->loop, &c->wio);
            return;
        } else {
            conn_write_failed(c, errno);
            return;
        }
    }
    if (!c->read_wants_write)
        ev_io_stop(cfg->loop, &c->wio);
}

void conn_sent(struct conn *c, size_t n)
{
    c->carried = true;
    c->proto->wrote(c->session, n);
}

void conn_writable(struct conn *c)
{
    flush(c);
    if (c->state == CONN_OPEN && c->proto->ready(c->session))
        pump(c);
}

/* ------------------------------------------------------------------------ */
/* When a batch goes out                                                      */
/* ------------------------------------------------------------------------ */

/* Wake at time at, or at the end of a delay() pause or a back-off still
 * running if that is sooner. */
static void wake(struct conn *c, uint64_t at, uint64_t now)
{
    if (c->delay_until > now && c->delay_until < at)
        at = c->delay_until;
    if (c->retry_at > now && c->retry_at < at)
        at = c->retry_at;
    timer_start(c, at > now ? at - now : 0);
}

/* The delay() pause before the next batch: whether it is over. A pause is
 * asked for once per batch and served out even if the connection closes
 * and reopens meanwhile: asking again on every reconnect would never let a
 * request out when the server closes idle connections sooner. */
static bool paused(struct conn *c, uint64_t now)
{
    const struct conn_config *cfg = c->cfg;
    if (c->delay_served)
        return false;
    if (!c->delay_until) {
        double ms = cfg->hooks.delay(cfg->hooks.arg);
        if (c->live->stopping)
            return true;
        /* Converting a delay past the range of uint64_t (1e300, inf) is
         * undefined, and NaN compares false: both would give no pause. */
        uint64_t us = ms > 0 ? (uint64_t)((ms < DELAY_MAX_MS ? ms : DELAY_MAX_MS) * 1000) : 0;
        c->delay_until = now + us;
        cfg->stats->pauses++;
        cfg->stats->paused_us += us;
    }
    if (c->delay_until > now) {
        uint64_t oldest = c->state == CONN_OPEN ? c->proto->oldest(c->session) : 0;
        wake(c, oldest ? oldest + cfg->timeout_us : c->delay_until, now);
        return true;
    }
    /* Under -R the pause is the script's think time, not the server's:
     * latency counts from its end when that is after the intended time. */
    if (c->delay_until > c->available_at)
        c->available_at = c->delay_until;
    c->delay_until = 0;
    c->delay_served = true;
    return false;
}

/* -R: whether the connection's intended time for its next batch has come;
 * if not, it waits in the schedule. The connection in place g of C (see
 * spec_turns) sends batch k when request (g + k C) * depth of the run is
 * due, so the run as a whole keeps to its target rate whatever C, the
 * thread count and the shards; once the profile (--stages) is over, it
 * sends nothing more. */
static bool waiting_for_turn(struct conn *c, uint64_t now)
{
    struct pace *p = c->cfg->pace;
    if (!p->start)
        return true; /* the run has not started: conn_kick() comes then */
    double place = (double)p->first + (double)c->index * (double)p->stride;
    double slot = place + (double)c->batches * (double)p->total;
    double at = profile_due_us(&p->profile, slot * (double)p->depth);
    if (at >= p->end_us)
        return true;
    c->turn.due = p->start + (uint64_t)at;
    if (c->turn.due <= now)
        return false;
    if (!c->turn.slot)
        schedule_add(&p->schedule, &c->turn);
    return true;
}

/* Claim the batch's requests, have it built, and hand it to the session.
 * Returns false when nothing went out. */
static bool send_batch(struct conn *c, uint64_t now)
{
    const struct conn_config *cfg = c->cfg;
    struct stats *s = cfg->stats;
    size_t depth = cfg->sessions[c->protocol].depth;
    /* Claim before request() runs, so that scripts see only requests sent;
     * one may have been claimed when the connection was opened for it. */
    if (cfg->budget) {
        size_t claimed = c->claimed;
        c->claimed = 0;
        depth = claimed + (depth > claimed ? budget_claim(cfg->budget, depth - claimed) : 0);
        if (depth == 0)
            return false;
    }
    const struct request *r = cfg->hooks.request(cfg->hooks.arg, &c->own, c->protocol);
    if (!r || c->live->stopping) {
        if (cfg->budget)
            budget_return(cfg->budget, depth);
        c->done = !r;
        return false;
    }
    uint64_t start = 0; /* from when each request goes out */
    if (cfg->pace) {
        /* Latency counts from the intended time, however late the send,
         * but not from before the connection was set up or its pause ended. */
        start = c->turn.due > c->available_at ? c->turn.due : c->available_at;
        hist_record(s->lag, now - c->turn.due);
        c->batches++;
    }
    s->sent += depth;
    c->delay_served = false;
    c->proto->submit(c->session, r, r == &c->own, depth, now, start);
    /* The response timer keeps the deadline of an earlier batch when it is
     * still running: on_timer moves it on, so the common case costs nothing. */
    if (!ev_is_active(&c->timer))
        timer_start(c, cfg->timeout_us);
    return true;
}

/* Hand the session every batch that may go now, then write them at once;
 * otherwise arrange to be called when one may: the pause's timer, the
 * schedule, the connection opening. Returns whether it wrote. */
static bool pump(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    bool sent = false;
    while (!c->live->stopping && !c->done && !c->live->held) {
        if (c->state == CONN_CONNECTING || c->state == CONN_TUNNEL || c->state == CONN_HANDSHAKE)
            break; /* ready() pumps */
        if (c->state == CONN_OPEN && !c->proto->ready(c->session))
            break; /* the session is busy: it pumps when it is done */
        if (cfg->budget && !c->claimed && !budget_left(cfg->budget))
            break;
        uint64_t now = clock_us();
        if (c->live->delay && paused(c, now))
            break;
        if (cfg->pace && waiting_for_turn(c, now))
            break;
        if (c->retry_at > now) { /* a back-off is running */
            uint64_t oldest = c->state == CONN_OPEN ? c->proto->oldest(c->session) : 0;
            wake(c, oldest ? oldest + cfg->timeout_us : c->retry_at, now);
            break;
        }
        if (c->state == CONN_CLOSED) {
            conn_start(c, true);
            return false;
        }
        if (!send_batch(c, now))
            break;
        sent = true;
    }
    if (sent && c->state == CONN_OPEN)
        flush(c);
    return sent;
}

void conn_kick(struct conn *c) { pump(c); }

void conn_turn(struct schedule_entry *turn)
{
    pump((struct conn *)(void *)((char *)turn - offsetof(struct conn, turn)));
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                    */
/* ------------------------------------------------------------------------ */

void conn_eof(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    enum cause cause;
    enum proto_status st = c->proto->eof(c->session, clock_us(), &cause);
    if (c->live->stopping)
        return;
    if (st == PROTO_FAIL)
        failed(c, &cfg->stats->errors.read, cause);
    else
        closed(c);
}

/* After input: the next batch goes out from here, with what the session has
 * to say in return (HTTP/2's acknowledgements and window updates), or that
 * alone when no batch goes. Returns whether the session could take a batch:
 * for HTTP/1.1 the one before it is done, so its answer cannot be in the
 * socket yet. */
bool conn_reply(struct conn *c)
{
    if (c->proto->ready(c->session)) {
        if (!pump(c) && c->state == CONN_OPEN && !ev_is_active(&c->wio))
            flush(c);
        return true;
    }
    if (!ev_is_active(&c->wio))
        flush(c);
    return false;
}

/* Bytes read at now, to the session. Returns whether the connection goes
 * on (it may have ended, normally or not, or the run). */
bool conn_take(struct conn *c, const char *buf, size_t n, uint64_t now)
{
    const struct conn_config *cfg = c->cfg;
    enum cause cause;
    cfg->stats->bytes += (uint64_t)n;
    enum proto_status st = c->proto->input(c->session, buf, n, now, &cause);
    conn_record(cfg, c->live);
    if (c->live->stopping)
        return false;
    if (st == PROTO_FAIL) {
        failed(c, &cfg->stats->errors.read, cause);
        return false;
    }
    if (st == PROTO_CLOSE) {
        closed(c);
        return false;
    }
    return true;
}

void conn_read_failed(struct conn *c, int err)
{
    enum cause cause = err == ECONNRESET ? CAUSE_RESET : CAUSE_READ_OTHER;
    failed(c, &c->cfg->stats->errors.read, transport_cause(c, cause));
}

static void read_ready(struct conn *c)
{
    const struct conn_config *cfg = c->cfg;
    size_t burst = 0;
    bool owed = false; /* input came that reply() has not followed yet */
    for (;;) {
        ssize_t n = cfg->transport->read(&c->sock, cfg->rbuf, cfg->rbuf_len);
        if (n > 0) {
            burst += (size_t)n;
            if (!conn_take(c, cfg->rbuf, (size_t)n, clock_us()))
                return;
            bool more = cfg->transport->pending(&c->sock) > 0;
            /* Records the transport holds already (TLS) are read first, so
             * that one write carries what all of them call for. */
            owed = more && burst < READ_BURST;
            if (owed)
                continue;
            bool done = conn_reply(c);
            if (c->state != CONN_OPEN || (done && !more))
                return;
            /* A short read drained the socket; a full one may have left more. */
            if ((size_t)n < cfg->rbuf_len && !more)
                return;
            if (burst >= READ_BURST) {
                /* Bytes held inside the transport raise no event. */
                if (more)
                    ev_feed_event(cfg->loop, &c->rio, EV_READ);
                return;
            }
        } else if (n == 0) {
            conn_eof(c);
            return;
        } else if (n == IO_WANT_READ) {
            /* What the transport held was no data (a TLS session ticket). */
            if (owed)
                conn_reply(c);
            return;
        } else if (n == IO_WANT_WRITE) {
            /* TLS: the read must first write; resumed from on_write. */
            c->read_wants_write = true;
            ev_io_start(cfg->loop, &c->wio);
            return;
        } else {
            conn_read_failed(c, errno);
            return;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Watcher callbacks                                                          */
/* ------------------------------------------------------------------------ */

/* Whether c, woken to read (or by its transport's timer), goes on to its
 * session: not once stopping; a handshake under way takes the wake-up. */
static bool open_for_io(struct conn *c)
{
    if (c->live->stopping)
        return false;
    if (c->state == CONN_HANDSHAKE || c->state == CONN_TUNNEL) {
        (c->state == CONN_TUNNEL ? c->cfg->tunnel : conn_handshake)(c);
        return false;
    }
    return c->state == CONN_OPEN;
}

/* Once the worker is stopping (the end of the run, or thread:stop() from a
 * hook), the watchers still pending in the same loop iteration do nothing:
 * a response read after the stop is not counted nor given to response(). */
static void on_read(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop, (void)revents;
    struct conn *c = io->data;
    if (!open_for_io(c))
        return;
    if (c->write_wants_read) {
        c->write_wants_read = false;
        flush(c);
        if (c->state != CONN_OPEN)
            return;
    }
    read_ready(c);
}

static void on_write(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)revents;
    struct conn *c = io->data;
    if (c->live->stopping)
        return;
    switch (c->state) {
    case CONN_CONNECTING:
        conn_connect_done(c, net_connect_error(c->sock.fd));
        break;
    case CONN_TUNNEL:
        c->cfg->tunnel(c);
        break;
    case CONN_HANDSHAKE:
        conn_handshake(c);
        break;
    case CONN_OPEN:
        if (c->read_wants_write) {
            c->read_wants_write = false;
            read_ready(c);
            if (c->state != CONN_OPEN)
                break;
        }
        conn_writable(c);
        break;
    default:
        ev_io_stop(loop, io);
        break;
    }
}

/* A timer of the transport's own fired (QUIC): during the handshake, it goes
 * on or has failed; once open, the session says whether the connection goes
 * on, and what recovery sends is written. */
static void on_wake(struct sock *s)
{
    struct conn *c = (struct conn *)((char *)s - offsetof(struct conn, sock));
    const struct conn_config *cfg = c->cfg;
    enum cause cause;
    if (!open_for_io(c))
        return;
    switch (c->proto->wake(c->session, clock_us(), &cause)) {
    case PROTO_FAIL:
        failed(c,
               cause == CAUSE_QUIC_IDLE_TIMEOUT ? &cfg->stats->errors.timeout
                                                : &cfg->stats->errors.read,
               cause);
        break;
    case PROTO_CLOSE:
        closed(c);
        break;
    case PROTO_OK:
        conn_reply(c);
        break;
    }
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct conn *c = t->data;
    const struct conn_config *cfg = c->cfg;
    if (c->live->stopping)
        return;
    switch (c->state) {
    case CONN_CLOSED: /* a back-off or a pause is over */
        pump(c);
        break;
    case CONN_CONNECTING:
    case CONN_TUNNEL:
    case CONN_HANDSHAKE:
        conn_connect_failed(c, CAUSE_CONNECT_TIMEOUT);
        break;
    case CONN_OPEN: {
        uint64_t now = clock_us(), oldest = c->proto->oldest(c->session);
        if (oldest && now >= oldest + cfg->timeout_us) {
            timed_out(c);
            break;
        }
        /* A delay() pause may be over; requests may be in flight meanwhile
         * (HTTP/2): the timer goes on to whichever comes first, the end of
         * a pause still running or the oldest one's deadline. */
        pump(c);
        if (c->state == CONN_OPEN && (oldest = c->proto->oldest(c->session)) != 0)
            wake(c, oldest + cfg->timeout_us, now);
        break;
    }
    }
}
