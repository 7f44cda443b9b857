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
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "clock.h"
#include "hist.h"
#include "http.h"
#include "net.h"

/* After a failure (a connect that failed, or a connection that ended in an
 * error before its first response) the slot waits 1 ms, doubling up to 1 s,
 * so a dead or hostile target costs no CPU and the counts stay meaningful. */
#define BACKOFF_MIN_US 1000
#define BACKOFF_MAX_US 1000000
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

void conn_init(struct conn *c, struct conn_env *env, size_t index)
{
    memset(c, 0, sizeof *c);
    c->env = env;
    c->index = index;
    c->sock.fd = -1;
    c->state = CONN_CLOSED;
    ev_init(&c->rio, on_read);
    ev_init(&c->wio, on_write);
    ev_init(&c->timer, on_timer);
    c->rio.data = c->wio.data = c->timer.data = c;
    c->session = env->proto->new (c);
}

static void timer_start(struct conn *c, uint64_t us)
{
    struct ev_loop *loop = c->env->loop;
    ev_timer_stop(loop, &c->timer);
    ev_timer_set(&c->timer, (double)us / 1e6, 0.);
    ev_timer_start(loop, &c->timer);
}

/* The slot was opened, or failed to open, for the first time. */
static void settle(struct conn *c)
{
    struct conn_env *env = c->env;
    if (c->settled)
        return;
    c->settled = true;
    if (--env->unsettled == 0 && env->settled)
        env->settled(env->arg);
}

/* Close the socket. Requests in flight must have been accounted for. */
static void drop(struct conn *c)
{
    struct conn_env *env = c->env;
    ev_io_stop(env->loop, &c->rio);
    ev_io_stop(env->loop, &c->wio);
    ev_timer_stop(env->loop, &c->timer);
    if (c->state == CONN_OPEN) {
        env->proto->abort(c);
        env->open--;
    }
    if (c->sock.fd >= 0) {
        env->transport->close(&c->sock);
        close(c->sock.fd);
        c->sock.fd = -1;
    }
    c->state = CONN_CLOSED;
    c->read_wants_write = c->write_wants_read = false;
}

void conn_stop(struct conn *c)
{
    struct conn_env *env = c->env;
    if (env->budget && c->state == CONN_OPEN)
        budget_return(env->budget, env->proto->inflight(c));
    if (env->budget && c->claimed)
        budget_return(env->budget, c->claimed);
    c->claimed = 0;
    drop(c);
    if (env->pace)
        schedule_remove(&env->pace->schedule, c);
}

void conn_free(struct conn *c)
{
    conn_stop(c);
    c->env->transport->release(&c->sock);
    c->env->proto->free(c->session);
    request_free(&c->own);
}

/* ------------------------------------------------------------------------ */
/* Outcomes: responses, errors, closes                                        */
/* ------------------------------------------------------------------------ */

bool conn_response(struct conn *c, const struct proto_response *r, uint64_t start_at,
                   uint64_t sent_at, uint64_t now)
{
    struct conn_env *env = c->env;
    struct stats *s = env->stats;
    int status = r->status;
    s->requests++;
    s->status[status > 0 && status < STATS_STATUS_MAX ? status : 0]++;
    if (status > 399)
        s->errors.status++;
    hist_record(s->latency, now - start_at);
    if (env->pace)
        hist_record(s->u_latency, now - sent_at);
    c->backoff_us = 0;
    if (env->budget)
        budget_resolve(env->budget, 1);
    if (env->response) {
        env->response(env->arg, r);
        if (env->stopping)
            return false;
    }
    return true;
}

void conn_requests_returned(struct conn *c, size_t n)
{
    if (c->env->budget && n)
        budget_return(c->env->budget, n);
}

static void count(struct conn *c, uint64_t *class, enum cause cause, uint64_t n)
{
    *class += n;
    c->env->stats->causes[cause] += n;
}

void conn_request_failed(struct conn *c, enum cause cause)
{
    struct conn_env *env = c->env;
    count(c, &env->stats->errors.read, cause, 1);
    if (env->budget)
        budget_resolve(env->budget, 1);
}

/* After a failure: try again after the back-off, or else on the next turn
 * of the loop (never from inside the call that failed: a target that fails
 * at once would recurse). The slot reopens then if it has a batch to send. */
static void retry(struct conn *c, bool backoff)
{
    uint64_t wait = 0;
    if (backoff) {
        c->backoff_us = c->backoff_us ? c->backoff_us * 2 : BACKOFF_MIN_US;
        if (c->backoff_us > BACKOFF_MAX_US)
            c->backoff_us = BACKOFF_MAX_US;
        wait = c->backoff_us;
    }
    c->retry_at = clock_us() + wait;
    timer_start(c, wait);
}

/* The connection ended normally: the response said so, it ended a body
 * delimited by the close, or the server closed it while it was idle. */
static void closed(struct conn *c)
{
    c->env->stats->reconnects++;
    drop(c);
    pump(c);
}

/* The open connection failed. Every request in flight on it ends here, as
 * one error each (one error when none was in flight). One that failed
 * before it carried a request backs off like a failed connect. */
static void failed(struct conn *c, uint64_t *class, enum cause cause)
{
    struct conn_env *env = c->env;
    size_t n = env->proto->inflight(c);
    count(c, class, cause, n ? n : 1);
    if (env->budget && n)
        budget_resolve(env->budget, n);
    bool backoff = !c->carried;
    drop(c);
    retry(c, backoff);
}

static void write_failed(struct conn *c, int err)
{
    enum cause cause = err == EPIPE        ? CAUSE_BROKEN_PIPE
                       : err == ECONNRESET ? CAUSE_RESET
                                           : CAUSE_WRITE_OTHER;
    failed(c, &c->env->stats->errors.write, cause);
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

/* Connecting failed. When a batch was waiting for the connection under -n,
 * that is the outcome of one of its requests, and the next attempt (for the
 * next request) need not wait: every attempt brings the run nearer its end,
 * so a run against a target that cannot be reached ends. Otherwise attempts
 * back off, so a dead target costs no CPU and the counts stay meaningful. */
static void connect_failed(struct conn *c, enum cause cause)
{
    struct conn_env *env = c->env;
    count(c, &env->stats->errors.connect, cause, 1);
    bool outcome = c->claimed;
    if (outcome)
        budget_resolve(env->budget, c->claimed);
    c->claimed = 0;
    c->want = false;
    settle(c);
    drop(c);
    retry(c, !outcome);
}

static void timed_out(struct conn *c)
{
    struct conn_env *env = c->env;
    size_t n = env->proto->inflight(c);
    enum cause cause = env->proto->expired(c);
    /* Every request still unanswered has timed out. A connection whose
     * set-up never completed (HTTP/2's SETTINGS) fails even with none. */
    count(c, &env->stats->errors.timeout, cause, n || cause == CAUSE_RESPONSE_TIMEOUT ? n : 1);
    if (env->budget && n)
        budget_resolve(env->budget, n);
    drop(c);
    retry(c, false);
}

/* ------------------------------------------------------------------------ */
/* Connecting                                                                 */
/* ------------------------------------------------------------------------ */

static void ready(struct conn *c)
{
    struct conn_env *env = c->env;
    struct stats *s = env->stats;
    uint64_t now = clock_us();
    ev_timer_stop(env->loop, &c->timer);
    ev_io_stop(env->loop, &c->wio);
    ev_io_start(env->loop, &c->rio);
    s->connects++;
    if (c->opened)
        s->reopened++;
    hist_record(s->connect, now - c->connect_at);
    if (env->transport->secure) {
        s->handshakes++;
        s->resumed += env->transport->resumed(&c->sock) ? 1 : 0;
        s->handshake_us += now - c->connected_at;
    }
    c->state = CONN_OPEN;
    env->open++;
    c->opened = true;
    c->carried = false;
    c->want = false;
    c->available_at = now;
    env->proto->open(c);
    settle(c);
    flush(c); /* what the protocol says first (HTTP/2's preface) */
    if (c->state == CONN_OPEN)
        pump(c);
}

static void handshake(struct conn *c)
{
    struct ev_loop *loop = c->env->loop;
    switch (c->env->transport->handshake(&c->sock)) {
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
    c->connected_at = clock_us();
    handshake(c);
}

static void open_socket(struct conn *c)
{
    struct conn_env *env = c->env;
    bool in_progress;
    c->connect_at = clock_us();
    int fd = net_connect(env->addr, &in_progress);
    if (fd < 0) {
        connect_failed(c, connect_cause(errno));
        return;
    }
    c->sock.fd = fd;
    ev_io_set(&c->rio, fd, EV_READ);
    ev_io_set(&c->wio, fd, EV_WRITE);
    /* Connecting and the handshake are bounded by --timeout too. */
    timer_start(c, env->timeout_us);
    if (!in_progress) {
        connected(c);
        return;
    }
    c->state = CONN_CONNECTING;
    ev_io_start(env->loop, &c->wio);
}

void conn_start(struct conn *c, bool want)
{
    struct conn_env *env = c->env;
    c->want = want;
    /* Under -n the request waiting for the connection is claimed now: if the
     * connection cannot be made, that is its outcome. */
    if (want && env->budget && !c->claimed) {
        if (!budget_claim(env->budget, 1)) {
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
    struct conn_env *env = c->env;
    const char *data;
    size_t len;
    if (c->write_wants_read)
        return; /* on_read resumes it */
    while ((len = env->proto->output(c, &data)) > 0) {
        ssize_t n = env->transport->write(&c->sock, data, len);
        if (n > 0) {
            c->carried = true;
            env->proto->wrote(c, (size_t)n);
        } else if (n == IO_WANT_WRITE) {
            ev_io_start(env->loop, &c->wio);
            return;
        } else if (n == IO_WANT_READ) {
            /* TLS: the write needs the peer's data first. The read watcher
             * is always armed; the write watcher would only spin. */
            c->write_wants_read = true;
            if (!c->read_wants_write)
                ev_io_stop(env->loop, &c->wio);
            return;
        } else {
            write_failed(c, errno);
            return;
        }
    }
    if (!c->read_wants_write)
        ev_io_stop(env->loop, &c->wio);
}

/* ------------------------------------------------------------------------ */
/* When a batch goes out                                                      */
/* ------------------------------------------------------------------------ */

/* Wake at time at, or at the end of a delay() pause still running if that
 * is sooner. */
static void wake(struct conn *c, uint64_t at, uint64_t now)
{
    if (c->delay_until > now && c->delay_until < at)
        at = c->delay_until;
    timer_start(c, at > now ? at - now : 0);
}

/* The delay() pause before the next batch: whether it is over. A pause is
 * asked for once per batch and served out even if the connection closes
 * and reopens meanwhile: asking again on every reconnect would never let a
 * request out when the server closes idle connections sooner. */
static bool paused(struct conn *c, uint64_t now)
{
    struct conn_env *env = c->env;
    if (c->delay_served)
        return false;
    if (!c->delay_until) {
        double ms = env->delay(env->arg);
        if (env->stopping)
            return true;
        /* Converting a delay past the range of uint64_t (1e300, inf) is
         * undefined, and NaN compares false: both would give no pause. */
        uint64_t us = ms > 0 ? (uint64_t)((ms < DELAY_MAX_MS ? ms : DELAY_MAX_MS) * 1000) : 0;
        c->delay_until = now + us;
        env->stats->pauses++;
        env->stats->paused_us += us;
    }
    if (c->delay_until > now) {
        uint64_t oldest = c->state == CONN_OPEN ? env->proto->oldest(c) : 0;
        wake(c, oldest ? oldest + env->timeout_us : c->delay_until, now);
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
 * if not, it waits in the schedule. Connection g of C sends batch k when
 * request (g + k C) * depth of the run is due, so the run as a whole keeps
 * to its target rate whatever C and the thread count; once the profile
 * (--stages) is over, it sends nothing more. */
static bool waiting_for_turn(struct conn *c, uint64_t now)
{
    struct pace *p = c->env->pace;
    if (!p->start)
        return true; /* the run has not started: conn_kick() comes then */
    double slot = (double)(p->first + c->index) + (double)c->batches * (double)p->total;
    double at = profile_due_us(&p->profile, slot * (double)p->depth);
    if (isinf(at))
        return true;
    c->due = p->start + (uint64_t)at;
    if (c->due <= now)
        return false;
    if (!c->slot)
        schedule_add(&p->schedule, c);
    return true;
}

/* Claim the batch's requests, have it built, and hand it to the session.
 * Returns false when nothing went out. */
static bool send_batch(struct conn *c, uint64_t now)
{
    struct conn_env *env = c->env;
    struct stats *s = env->stats;
    size_t depth = env->depth;
    /* Claim before request() runs, so that scripts see only requests sent;
     * one may have been claimed when the connection was opened for it. */
    if (env->budget) {
        size_t claimed = c->claimed;
        c->claimed = 0;
        depth = claimed + (depth > claimed ? budget_claim(env->budget, depth - claimed) : 0);
        if (depth == 0)
            return false;
    }
    const struct request *r = env->request(env->arg, &c->own);
    if (!r || env->stopping) {
        if (env->budget)
            budget_return(env->budget, depth);
        c->done = !r;
        return false;
    }
    uint64_t start = 0; /* from when each request goes out */
    if (env->pace) {
        /* Latency counts from the intended time, however late the send,
         * but not from before the connection was set up or its pause ended. */
        start = c->due > c->available_at ? c->due : c->available_at;
        hist_record(s->lag, now - c->due);
        c->batches++;
    }
    s->sent += depth;
    c->delay_served = false;
    env->proto->submit(c, r, depth, now, start);
    /* The response timer keeps the deadline of an earlier batch when it is
     * still running: on_timer moves it on, so the common case costs nothing. */
    if (!ev_is_active(&c->timer))
        timer_start(c, env->timeout_us);
    return true;
}

/* Hand the session every batch that may go now, then write them at once;
 * otherwise arrange to be called when one may: the pause's timer, the
 * schedule, the connection opening. Returns whether it wrote. */
static bool pump(struct conn *c)
{
    struct conn_env *env = c->env;
    bool sent = false;
    while (!env->stopping && !c->done) {
        if (c->state == CONN_CONNECTING || c->state == CONN_HANDSHAKE)
            break; /* ready() pumps */
        if (c->state == CONN_OPEN && !env->proto->ready(c))
            break; /* the session is busy: it pumps when it is done */
        if (env->budget && !c->claimed && !budget_left(env->budget))
            break;
        uint64_t now = clock_us();
        if (env->delay && paused(c, now))
            break;
        if (env->pace && waiting_for_turn(c, now))
            break;
        if (c->state == CONN_CLOSED) {
            if (c->retry_at > now)
                timer_start(c, c->retry_at - now);
            else
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

/* ------------------------------------------------------------------------ */
/* Reading                                                                    */
/* ------------------------------------------------------------------------ */

static void at_eof(struct conn *c)
{
    struct conn_env *env = c->env;
    enum cause cause;
    enum proto_status st = env->proto->eof(c, clock_us(), &cause);
    if (env->stopping)
        return;
    if (st == PROTO_FAIL)
        failed(c, &env->stats->errors.read, cause);
    else
        closed(c);
}

/* After input: the next batch goes out from here, with what the session has
 * to say in return (HTTP/2's acknowledgements and window updates), or that
 * alone when no batch goes. Returns whether the session could take a batch:
 * for HTTP/1.1 the one before it is done, so its answer cannot be in the
 * socket yet. */
static inline bool reply(struct conn *c)
{
    if (c->env->proto->ready(c)) {
        if (!pump(c) && c->state == CONN_OPEN && !ev_is_active(&c->wio))
            flush(c);
        return true;
    }
    if (!ev_is_active(&c->wio))
        flush(c);
    return false;
}

static void read_ready(struct conn *c)
{
    struct conn_env *env = c->env;
    size_t burst = 0;
    bool owed = false; /* input came that reply() has not followed yet */
    for (;;) {
        ssize_t n = env->transport->read(&c->sock, env->rbuf, env->rbuf_len);
        if (n > 0) {
            enum cause cause;
            env->stats->bytes += (uint64_t)n;
            burst += (size_t)n;
            enum proto_status st = env->proto->input(c, env->rbuf, (size_t)n, clock_us(), &cause);
            if (env->stopping)
                return;
            if (st == PROTO_FAIL) {
                failed(c, &env->stats->errors.read, cause);
                return;
            }
            if (st == PROTO_CLOSE) {
                closed(c);
                return;
            }
            bool more = env->transport->pending(&c->sock) > 0;
            /* Records the transport holds already (TLS) are read first, so
             * that one write carries what all of them call for. */
            owed = more && burst < READ_BURST;
            if (owed)
                continue;
            bool done = reply(c);
            if (c->state != CONN_OPEN || (done && !more))
                return;
            /* A short read drained the socket; a full one may have left more. */
            if ((size_t)n < env->rbuf_len && !more)
                return;
            if (burst >= READ_BURST) {
                /* Bytes held inside the transport raise no event. */
                if (more)
                    ev_feed_event(env->loop, &c->rio, EV_READ);
                return;
            }
        } else if (n == 0) {
            at_eof(c);
            return;
        } else if (n == IO_WANT_READ) {
            /* What the transport held was no data (a TLS session ticket). */
            if (owed)
                reply(c);
            return;
        } else if (n == IO_WANT_WRITE) {
            /* TLS: the read must first write; resumed from on_write. */
            c->read_wants_write = true;
            ev_io_start(env->loop, &c->wio);
            return;
        } else {
            failed(c, &env->stats->errors.read,
                   errno == ECONNRESET ? CAUSE_RESET : CAUSE_READ_OTHER);
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
    if (c->env->stopping)
        return;
    if (c->state == CONN_HANDSHAKE) {
        handshake(c);
        return;
    }
    if (c->state != CONN_OPEN)
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
    if (c->env->stopping)
        return;
    switch (c->state) {
    case CONN_CONNECTING: {
        int err = net_connect_error(c->sock.fd);
        if (err)
            connect_failed(c, connect_cause(err));
        else
            connected(c);
        break;
    }
    case CONN_HANDSHAKE:
        handshake(c);
        break;
    case CONN_OPEN:
        if (c->read_wants_write) {
            c->read_wants_write = false;
            read_ready(c);
            if (c->state != CONN_OPEN)
                break;
        }
        flush(c);
        if (c->state == CONN_OPEN && c->env->proto->ready(c))
            pump(c);
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
    struct conn_env *env = c->env;
    if (env->stopping)
        return;
    switch (c->state) {
    case CONN_CLOSED: /* a back-off or a pause is over */
        pump(c);
        break;
    case CONN_CONNECTING:
    case CONN_HANDSHAKE:
        connect_failed(c, CAUSE_CONNECT_TIMEOUT);
        break;
    case CONN_OPEN: {
        uint64_t now = clock_us(), oldest = env->proto->oldest(c);
        if (oldest && now >= oldest + env->timeout_us) {
            timed_out(c);
            break;
        }
        /* A delay() pause may be over; requests may be in flight meanwhile
         * (HTTP/2): the timer goes on to whichever comes first, the end of
         * a pause still running or the oldest one's deadline. */
        pump(c);
        if (c->state == CONN_OPEN && (oldest = env->proto->oldest(c)) != 0)
            wake(c, oldest + env->timeout_us, now);
        break;
    }
    }
}
