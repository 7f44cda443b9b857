/* The /metrics server. Everything runs on main's loop and is non-blocking:
 * a connection reads one request head, is answered from the text it was
 * last given (shared, counted references, so that a new interval's text
 * does not disturb an answer under way), then waits for the next request
 * (keep-alive) or closes. Requests are parsed by the parser of script
 * requests (http_request.c); a request with a body is refused, since none is
 * expected. Connections are few: past SCRAPE_CONNS a new one takes the
 * place of the one that has waited longest for a request, so a client
 * holding connections open without sending (slowloris) cannot lock
 * Prometheus out, and each has a deadline.
 * SPDX-License-Identifier: MIT */
#include "scrape.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "http.h"
#include "http_request.h"
#include "xalloc.h"

/* New connections taken per wake-up of the listening socket, so that a
 * flood of them cannot keep the loop from everything else. */
#define ACCEPT_BATCH 32
/* How long a closing connection is read from after its answer (seconds). */
#define DRAIN_DEADLINE 2.0
/* How long no connection is taken after the descriptors ran out (seconds). */
#define ACCEPT_PAUSE 0.1

/* A text being served: freed by its last user. */
struct body {
    size_t refs, len;
    char data[];
};

struct client {
    struct scrape *s;
    int fd;
    ev_io io;
    ev_timer deadline;
    uint64_t waiting_since; /* clock_us: when it started waiting for a request; 0 answering */
    char in[SCRAPE_HEAD_MAX];
    size_t in_len;
    /* the answer being written: its head, then its body */
    char head[256];
    size_t head_len, sent;
    struct body *body; /* or NULL: the head says it all */
    const char *text;  /* the body: body's data, or a fixed text */
    size_t text_len;
    bool close_after;
    bool draining; /* answered and half closed: reading what is left */
};

struct scrape {
    struct ev_loop *loop;
    int fd;
    ev_io accept_io;
    ev_timer pause; /* taking no connection: out of descriptors */
    struct client *clients[SCRAPE_CONNS];
    struct body *body;
    uint64_t served;
};

static void body_release(struct body *b)
{
    if (b && --b->refs == 0)
        free(b);
}

static void client_close(struct client *c)
{
    struct scrape *s = c->s;
    ev_io_stop(s->loop, &c->io);
    ev_timer_stop(s->loop, &c->deadline);
    close(c->fd);
    body_release(c->body);
    for (size_t i = 0; i < SCRAPE_CONNS; i++)
        if (s->clients[i] == c)
            s->clients[i] = NULL;
    free(c);
}

static void arm_deadline(struct client *c)
{
    ev_timer_stop(c->s->loop, &c->deadline);
    ev_timer_set(&c->deadline, SCRAPE_DEADLINE, 0.);
    ev_timer_start(c->s->loop, &c->deadline);
}

/* ---- answering --------------------------------------------------------------- */

static void wait_request(struct client *c);

/* Writes what is left of the answer; true when all of it is out. */
static bool write_answer(struct client *c)
{
    for (;;) {
        struct iovec iov[2];
        int n = 0;
        size_t total = c->head_len + c->text_len;
        if (c->sent >= total)
            return true;
        if (c->sent < c->head_len)
            iov[n++] = (struct iovec){c->head + c->sent, c->head_len - c->sent};
        size_t from = c->sent > c->head_len ? c->sent - c->head_len : 0;
        if (c->text_len > from)
            iov[n++] = (struct iovec){(char *)c->text + from, c->text_len - from};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        if (w <= 0) {
            c->close_after = true; /* the peer is gone */
            return true;
        }
        c->sent += (size_t)w;
    }
}

/* After an answer that closes the connection: the sending side is shut,
 * and what the client still sends is read and dropped until it closes too
 * (or DRAIN_DEADLINE passes), since closing with unread bytes would make
 * the kernel reset the connection and the client might lose the answer. */
static void start_draining(struct client *c)
{
    shutdown(c->fd, SHUT_WR);
    c->draining = true;
    c->waiting_since = 1; /* the first to give way to a new connection */
    ev_timer_stop(c->s->loop, &c->deadline);
    ev_timer_set(&c->deadline, DRAIN_DEADLINE, 0.);
    ev_timer_start(c->s->loop, &c->deadline);
    ev_io_stop(c->s->loop, &c->io);
    ev_io_set(&c->io, c->fd, EV_READ);
    ev_io_start(c->s->loop, &c->io);
}

static void drain(struct client *c)
{
    char sink[4096];
    for (;;) {
        ssize_t n = read(c->fd, sink, sizeof sink);
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        client_close(c);
        return;
    }
}

static void finish_answer(struct client *c)
{
    body_release(c->body);
    c->body = NULL;
    c->text = NULL;
    c->text_len = 0;
    if (c->close_after)
        start_draining(c);
    else
        wait_request(c);
}

static void answer(struct client *c, int status, const char *reason, const char *extra,
                   struct body *body, const char *text)
{
    c->body = body;
    c->text = body ? body->data : text;
    c->text_len = body ? body->len : strlen(c->text);
    c->head_len = (size_t)snprintf(
        c->head, sizeof c->head,
        "HTTP/1.1 %d %s\r\nContent-Type: text/plain; %scharset=utf-8\r\nContent-Length: "
        "%zu\r\n%s%s\r\n",
        status, reason, body ? "version=0.0.4; " : "", c->text_len, extra,
        c->close_after ? "Connection: close\r\n" : "");
    c->sent = 0;
    c->waiting_since = 0;
    arm_deadline(c);
    if (write_answer(c)) {
        finish_answer(c);
        return;
    }
    ev_io_stop(c->s->loop, &c->io);
    ev_io_set(&c->io, c->fd, EV_WRITE);
    ev_io_start(c->s->loop, &c->io);
}

/* The request line ends in HTTP/1.0: the connection closes after the answer. */
static bool version_10(const char *head, size_t len)
{
    const char *eol = memchr(head, '\n', len);
    size_t n = eol ? (size_t)(eol - head) : len;
    if (n && head[n - 1] == '\r')
        n--;
    return n >= 8 && memcmp(head + n - 8, "HTTP/1.0", 8) == 0;
}

static bool asks_close(const struct http_request_info *info)
{
    size_t pos = 0, nlen, vlen;
    const char *name, *value;
    while (http_field_next(info->fields, info->fields_len, &pos, &name, &nlen, &value, &vlen))
        if (nlen == 10 && strncasecmp(name, "Connection", 10) == 0 &&
            http_list_has(value, vlen, "close", 5))
            return true;
    return false;
}

/* The head in[0, len) is complete: answer it. A request pipelined behind
 * it waits in the buffer until this answer is out. */
static void route(struct client *c, size_t len)
{
    struct http_request_info info;
    size_t pos = 0;
    char err[128];
    struct scrape *s = c->s;
    int status = 400;
    if (http_request_parse(c->in, len, NULL, 0, err, sizeof err) == 1 &&
        http_request_next(c->in, len, &pos, &info) && !info.body_len) {
        size_t path_len = strcspn(info.target, "?");
        bool metrics = (path_len < info.target_len ? path_len : info.target_len) == 8 &&
                       memcmp(info.target, "/metrics", 8) == 0;
        bool get = info.method_len == 3 && memcmp(info.method, "GET", 3) == 0;
        status = !metrics ? 404 : !get ? 405 : 200;
        c->close_after = version_10(c->in, len) || asks_close(&info);
    } else {
        c->close_after = true; /* what follows cannot be framed */
    }
    memmove(c->in, c->in + len, c->in_len - len);
    c->in_len -= len;
    switch (status) {
    case 200:
        s->served++;
        s->body->refs++;
        answer(c, 200, "OK", "", s->body, NULL);
        break;
    case 404:
        answer(c, 404, "Not Found", "", NULL, "volley: only /metrics is here\n");
        break;
    case 405:
        answer(c, 405, "Method Not Allowed", "Allow: GET\r\n", NULL,
               "volley: /metrics answers GET\n");
        break;
    default:
        answer(c, 400, "Bad Request", "", NULL, "volley: bad request\n");
    }
}

/* ---- reading ------------------------------------------------------------------ */

/* Where the head in the buffer ends (after its blank line), or 0. A bare LF
 * ends lines too (RFC 9112 §2.2). */
static size_t head_end(const struct client *c)
{
    for (size_t i = 0; i + 1 < c->in_len; i++) {
        if (c->in[i] != '\n')
            continue;
        if (c->in[i + 1] == '\n')
            return i + 2;
        if (c->in[i + 1] == '\r' && i + 2 < c->in_len && c->in[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Answers the request in the buffer, if it is whole. True when an answer
 * started (or the connection closed). */
static bool serve_buffered(struct client *c)
{
    size_t end = head_end(c);
    if (end) {
        route(c, end);
        return true;
    }
    if (c->in_len == sizeof c->in) {
        c->close_after = true;
        answer(c, 431, "Request Header Fields Too Large", "", NULL,
               "volley: request head too large\n");
        return true;
    }
    return false;
}

static void read_request(struct client *c)
{
    for (;;) {
        ssize_t n = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            client_close(c);
            return;
        }
        c->in_len += (size_t)n;
        if (serve_buffered(c))
            return;
    }
}

static void wait_request(struct client *c)
{
    c->waiting_since = clock_us();
    arm_deadline(c);
    ev_io_stop(c->s->loop, &c->io);
    ev_io_set(&c->io, c->fd, EV_READ);
    ev_io_start(c->s->loop, &c->io);
    serve_buffered(c);
}

static void on_client(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    struct client *c = w->data;
    if (c->draining) {
        drain(c);
    } else if (revents & EV_READ) {
        read_request(c);
    } else if (write_answer(c)) {
        finish_answer(c);
    }
}

static void on_deadline(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    client_close(t->data);
}

/* ---- accepting ----------------------------------------------------------------- */

/* A free place for a new connection: an empty one, or else the one that has
 * waited longest for a request; -1 when every one is answering. */
static int place_for(struct scrape *s)
{
    int oldest = -1;
    for (int i = 0; i < SCRAPE_CONNS; i++) {
        struct client *c = s->clients[i];
        if (!c)
            return i;
        if (c->waiting_since &&
            (oldest < 0 || c->waiting_since < s->clients[oldest]->waiting_since))
            oldest = i;
    }
    if (oldest >= 0)
        client_close(s->clients[oldest]);
    return oldest;
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    struct scrape *s = w->data;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            /* out of descriptors: the waiting connection would wake the
             * loop again at once, so stop taking any for a while */
            ev_io_stop(loop, &s->accept_io);
            ev_timer_start(loop, &s->pause);
            return;
        }
        if (fd < 0)
            return; /* EAGAIN, or a connection gone before it was taken */
        int at = place_for(s), one = 1;
        if (at < 0) {
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct client *c = xcalloc(1, sizeof *c);
        c->s = s;
        c->fd = fd;
        ev_io_init(&c->io, on_client, fd, EV_READ);
        c->io.data = c;
        ev_timer_init(&c->deadline, on_deadline, SCRAPE_DEADLINE, 0.);
        c->deadline.data = c;
        s->clients[at] = c;
        (void)loop;
        wait_request(c);
        /* the request may be here already: answered before a flood of
         * connections behind it could push this one out */
        read_request(c);
    }
}

static void on_pause_over(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct scrape *s = t->data;
    ev_io_start(loop, &s->accept_io);
}

/* ---- the server ------------------------------------------------------------------ */

struct scrape *scrape_new(int fd)
{
    struct scrape *s = xcalloc(1, sizeof *s);
    s->fd = fd;
    scrape_set_body(s, "", 0);
    return s;
}

void scrape_start(struct scrape *s, struct ev_loop *loop)
{
    s->loop = loop;
    ev_io_init(&s->accept_io, on_accept, s->fd, EV_READ);
    s->accept_io.data = s;
    ev_io_start(loop, &s->accept_io);
    ev_timer_init(&s->pause, on_pause_over, ACCEPT_PAUSE, 0.);
    s->pause.data = s;
}

void scrape_set_body(struct scrape *s, const char *data, size_t len)
{
    struct body *b = xmalloc(sizeof *b + len + 1);
    b->refs = 1;
    b->len = len;
    memcpy(b->data, data, len);
    b->data[len] = '\0';
    body_release(s->body);
    s->body = b;
}

uint64_t scrape_count(const struct scrape *s) { return s->served; }

void scrape_free(struct scrape *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < SCRAPE_CONNS; i++)
        if (s->clients[i])
            client_close(s->clients[i]);
    if (s->loop) {
        ev_io_stop(s->loop, &s->accept_io);
        ev_timer_stop(s->loop, &s->pause);
    }
    close(s->fd);
    body_release(s->body);
    free(s);
}
