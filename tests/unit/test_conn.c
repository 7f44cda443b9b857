/* The connection machine (conn.c with the HTTP/1.1 session, h1.c) driven
 * without a worker: a real event loop, a real Unix socket whose other end
 * the test plays, and a transport over it that returns the results a test
 * scripts (EAGAIN, short writes, resets, TLS wants) at chosen calls.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "budget.h"
#include "clock.h"
#include "conn.h"
#include "h1.h"
#include "h2.h"
#include "hist.h"
#include "http.h"
#include "net.h"
#include "request.h"
#include "route.h"
#include "sources.h"
#include "unit.h"
#include "xalloc.h"

/* ---- a transport whose results a test scripts ------------------------------------------ */

#define FAULTS 8
struct fault {
    unsigned call;  /* the call it replaces, counting from 1 */
    ssize_t result; /* an io_result, or 0 for the end of the stream */
    int err;        /* errno with IO_ERROR */
};

static struct {
    unsigned reads, writes;
    struct fault read_faults[FAULTS], write_faults[FAULTS];
    size_t write_cap;    /* short writes: at most this much per call, 0 for no cap */
    unsigned held_after; /* the transport says it holds bytes after this read */
} io;

static bool injected(const struct fault *f, unsigned call, ssize_t *result)
{
    for (int i = 0; i < FAULTS; i++)
        if (f[i].call == call) {
            errno = f[i].err;
            *result = f[i].result;
            return true;
        }
    return false;
}

static ssize_t scripted_read(struct sock *s, char *buf, size_t len)
{
    ssize_t r;
    if (injected(io.read_faults, ++io.reads, &r))
        return r;
    return transport_plain.read(s, buf, len);
}

static ssize_t scripted_write(struct sock *s, const char *buf, size_t len)
{
    ssize_t r;
    if (injected(io.write_faults, ++io.writes, &r))
        return r;
    if (io.write_cap && len > io.write_cap)
        len = io.write_cap;
    return transport_plain.write(s, buf, len);
}

static size_t scripted_pending(struct sock *s)
{
    (void)s;
    return io.held_after && io.reads == io.held_after ? 1 : 0;
}

static struct transport scripted;

static void inject_read(unsigned call, ssize_t result, int err)
{
    for (int i = 0; i < FAULTS; i++)
        if (!io.read_faults[i].call) {
            io.read_faults[i] = (struct fault){call, result, err};
            return;
        }
}

static void inject_write(unsigned call, ssize_t result, int err)
{
    for (int i = 0; i < FAULTS; i++)
        if (!io.write_faults[i].call) {
            io.write_faults[i] = (struct fault){call, result, err};
            return;
        }
}

/* ---- the rig: a loop, a listening socket, one connection --------------------------------- */

struct rig {
    char dir[64], path[96];
    int listener, peer;         /* the test's end of the connection, -1 until accepted */
    struct route route;         /* straight to the listening socket */
    struct sources_ports ports; /* a worker's: its one address's */
    struct stats stats;
    struct budget budget;
    bool spent;
    struct request request;
    unsigned responses_seen;              /* response() calls */
    char fields_seen[512], body_seen[64]; /* what the last of them was given */
    bool lower_seen;
    double delay_ms; /* delay(), when set */
    char rbuf[64 * 1024];
    struct http_head_cache cache;
    struct conn_config cfg;
    struct conn_live live;
    struct conn conn;
};

static const struct request *rig_request(void *arg, struct request *own, size_t protocol)
{
    (void)own, (void)protocol;
    struct rig *r = arg;
    return &r->request;
}

static double rig_delay(void *arg)
{
    struct rig *r = arg;
    return r->delay_ms;
}

static void rig_response(void *arg, const struct proto_response *p)
{
    struct rig *r = arg;
    r->responses_seen++;
    if (r->live.wants.head)
        snprintf(r->fields_seen, sizeof r->fields_seen, "%.*s", (int)p->fields_len,
                 p->fields ? p->fields : "");
    if (r->live.wants.body)
        snprintf(r->body_seen, sizeof r->body_seen, "%.*s", (int)p->body_len,
                 p->body ? p->body : "");
    r->lower_seen = p->lower_case;
}

static void on_spent(void *arg)
{
    struct rig *r = arg;
    r->spent = true;
}

/* The request bytes: n copies of text (a whole request each). */
static void rig_requests(struct rig *r, const char *text, size_t n)
{
    size_t len = strlen(text);
    char *data = xmalloc(len * n + 1), err[128];
    for (size_t i = 0; i < n; i++)
        memcpy(data + i * len, text, len);
    data[len * n] = '\0';
    request_free(&r->request);
    if (!request_set(&r->request, data, len * n, err, sizeof err))
        UNIT_FAIL("request_set: %s", err);
    r->cfg.sessions[0].depth = n;
}

static struct rig *rig_new_proto(const struct proto_ops *proto, size_t streams)
{
    struct rig *r = xcalloc(1, sizeof *r);
    memset(&io, 0, sizeof io);
    scripted = transport_plain;
    scripted.read = scripted_read;
    scripted.write = scripted_write;
    scripted.pending = scripted_pending;
    strcpy(r->dir, "/tmp/volley-conn-XXXXXX");
    if (!mkdtemp(r->dir))
        abort();
    snprintf(r->path, sizeof r->path, "%s/s", r->dir);
    net_unix_addr(r->path, &r->route.addr);
    r->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (bind(r->listener, (struct sockaddr *)&r->route.addr.sa, r->route.addr.len) != 0 ||
        listen(r->listener, 16) != 0)
        abort();
    r->peer = -1;
    sources_ports_init(&r->ports, NULL, 0, 1, 1);
    stats_init(&r->stats);
    r->live.unsettled = 1;
    r->cfg = (struct conn_config){
        .loop = ev_loop_new(EVFLAG_AUTO),
        .transport = &scripted,
        .protocols = {proto},
        .nprotocols = 1,
        .route = &r->route,
        .ports = &r->ports,
        .timeout_us = 2000000,
        .stats = &r->stats,
        .rbuf = r->rbuf,
        .rbuf_len = sizeof r->rbuf,
        .sessions = {{.streams = streams,
                      .depth = 1,
                      .head_cache = &r->cache,
                      .stats = &r->stats,
                      .wants = &r->live.wants}},
        .hooks = {.request = rig_request, .response = rig_response, .arg = r},
    };
    rig_requests(r, "GET / HTTP/1.1\r\nHost: t\r\n\r\n", 1);
    conn_init(&r->conn, &r->cfg, &r->live, 0);
    return r;
}

static struct rig *rig_new(void) { return rig_new_proto(&proto_h1, 1); }

static void rig_budget(struct rig *r, uint64_t n)
{
    budget_init(&r->budget, n, on_spent, r);
    r->cfg.budget = &r->budget;
}

static void rig_free(struct rig *r)
{
    conn_free(&r->conn);
    ev_loop_destroy(r->cfg.loop);
    if (r->peer >= 0)
        close(r->peer);
    close(r->listener);
    unlink(r->path);
    rmdir(r->dir);
    sources_ports_free(&r->ports);
    request_free(&r->request);
    stats_free(&r->stats);
    free(r);
}

/* Turns of the loop, without waiting for events that are not ready. */
static void spin(struct rig *r, int turns)
{
    for (int i = 0; i < turns; i++)
        ev_run(r->cfg.loop, EVRUN_NOWAIT);
}

static void nap(void)
{
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* Runs the loop (waiting for its timers) until cond holds or ms pass. */
#define RUN_UNTIL(r, cond, ms)                                                                     \
    do {                                                                                           \
        uint64_t unit_end_ = clock_us() + (ms)*1000ULL;                                            \
        while (!(cond) && clock_us() < unit_end_) {                                                \
            ev_run((r)->cfg.loop, EVRUN_NOWAIT);                                                   \
            nap();                                                                                 \
        }                                                                                          \
    } while (0)

/* The test's end: the next connection accepted (closing the earlier one). */
static bool accept_peer(struct rig *r)
{
    struct pollfd p = {.fd = r->listener, .events = POLLIN};
    for (int i = 0; i < 100; i++) {
        spin(r, 1);
        if (poll(&p, 1, 10) == 1) {
            if (r->peer >= 0)
                close(r->peer);
            r->peer = accept4(r->listener, NULL, NULL, SOCK_CLOEXEC);
            return r->peer >= 0;
        }
    }
    return false;
}

/* Reads what the connection sent until want bytes arrived (or a second passed). */
static size_t peer_read(struct rig *r, char *buf, size_t want)
{
    size_t got = 0;
    uint64_t end = clock_us() + 1000000;
    while (got < want && clock_us() < end) {
        spin(r, 1);
        struct pollfd p = {.fd = r->peer, .events = POLLIN};
        if (poll(&p, 1, 1) != 1)
            continue;
        ssize_t n = read(r->peer, buf + got, want - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}

/* What the test's end writes; a connection volley closed fails the checks
 * that follow, not the test binary. */
static void peer_write(struct rig *r, const char *s)
{
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t n = send(r->peer, s + off, len - off, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        off += (size_t)n;
    }
}

static const char OK[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
#define GET "GET / HTTP/1.1\r\nHost: t\r\n\r\n"

/* ---- the cases --------------------------------------------------------------------------- */

TEST(one_request_one_response)
{
    struct rig *r = rig_new();
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256] = {0};
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    CHECK_STR(buf, GET);
    CHECK_U64(r->stats.sent, 1);
    peer_write(r, OK);
    RUN_UNTIL(r, r->stats.requests == 1 && r->stats.sent == 2, 1000);
    CHECK_U64(r->stats.requests, 1);
    CHECK_U64(r->responses_seen, 1);
    CHECK_U64(hist_count(r->stats.latency), 1);
    CHECK_U64(r->stats.connects, 1);
    CHECK_U64(hist_count(r->stats.connect), 1);
    /* The next request went out from the read path, on the same connection. */
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    CHECK_U64(r->stats.sent, 2);
    rig_free(r);
}

TEST(short_writes_and_would_block_deliver_the_request_whole)
{
    struct rig *r = rig_new();
    io.write_cap = 5;
    inject_write(2, IO_WANT_WRITE, 0);
    inject_write(4, IO_WANT_WRITE, 0);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256] = {0};
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    CHECK_STR(buf, GET);
    /* Nothing more is written until the response comes. */
    spin(r, 20);
    CHECK_U64(r->stats.sent, 1);
    CHECK(io.writes >= strlen(GET) / 5 + 2);
    rig_free(r);
}

TEST(write_reset_counts_one_error_per_request_in_flight)
{
    struct rig *r = rig_new();
    rig_requests(r, GET, 3);
    inject_write(1, IO_ERROR, ECONNRESET);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    RUN_UNTIL(r, r->stats.errors.write > 0, 500);
    CHECK_U64(r->stats.errors.write, 3);
    CHECK_U64(r->stats.causes[CAUSE_RESET], 3);
    /* It failed before carrying a request: the next attempt backs off. */
    CHECK(ev_is_active(&r->conn.timer));
    CHECK_U64(r->conn.state, CONN_CLOSED);
    RUN_UNTIL(r, r->stats.connects == 2, 500);
    CHECK_U64(r->stats.connects, 2);
    CHECK_U64(r->stats.reopened, 1);
    rig_free(r);
}

TEST(read_reset_with_pipelining_counts_each_request)
{
    struct rig *r = rig_new();
    rig_requests(r, GET, 3);
    rig_budget(r, 3);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, 3 * strlen(GET)), 3 * strlen(GET));
    inject_read(io.reads + 1, IO_ERROR, ECONNRESET);
    peer_write(r, "H"); /* makes the socket readable */
    RUN_UNTIL(r, r->spent, 500);
    CHECK(r->spent);
    CHECK_U64(r->stats.errors.read, 3);
    CHECK_U64(r->stats.causes[CAUSE_RESET], 3);
    CHECK_U64(r->stats.requests, 0);
    rig_free(r);
}

TEST(write_wanting_read_waits_for_the_peer_without_spinning)
{
    struct rig *r = rig_new();
    inject_write(1, IO_WANT_READ, 0);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    spin(r, 50);
    /* Waiting on a writable socket would call write on every turn. */
    CHECK_U64(io.writes, 1);
    CHECK(!ev_is_active(&r->conn.wio));
    /* The peer's bytes arrive (here: an early answer): the write goes on. */
    peer_write(r, OK);
    char buf[256] = {0};
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    RUN_UNTIL(r, r->stats.requests == 1, 500);
    CHECK_U64(r->stats.requests, 1);
    CHECK_U64(r->stats.errors.read, 0);
    rig_free(r);
}

TEST(read_wanting_write_resumes_when_writable)
{
    struct rig *r = rig_new();
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    inject_read(io.reads + 1, IO_WANT_WRITE, 0);
    peer_write(r, OK);
    RUN_UNTIL(r, r->stats.requests == 1, 500);
    CHECK_U64(r->stats.requests, 1);
    CHECK(!r->conn.read_wants_write);
    rig_free(r);
}

TEST(early_response_lets_the_body_finish_before_the_next_request)
{
    struct rig *r = rig_new();
    char req[8192];
    int head =
        snprintf(req, sizeof req, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4000\r\n\r\n");
    memset(req + head, 'x', 4000);
    req[head + 4000] = '\0';
    rig_requests(r, req, 1);
    io.write_cap = 100;
    inject_write(2, IO_WANT_WRITE, 0);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[16384];
    /* The head is in: answer at once, before reading the body. */
    CHECK_U64(peer_read(r, buf, 100), 100);
    peer_write(r, OK);
    RUN_UNTIL(r, r->stats.requests == 1, 500);
    CHECK_U64(r->stats.requests, 1);
    /* The rest of the body, then the next request, in order. */
    size_t total = 2 * strlen(req);
    CHECK_U64(peer_read(r, buf + 100, total - 100), total - 100);
    CHECK(memcmp(buf, req, strlen(req)) == 0);
    CHECK(memcmp(buf + strlen(req), req, strlen(req)) == 0);
    CHECK_U64(r->stats.sent, 2);
    CHECK_U64(r->stats.errors.write + r->stats.errors.read, 0);
    rig_free(r);
}

TEST(early_response_that_closes_stops_the_body)
{
    struct rig *r = rig_new();
    char req[70000];
    int head =
        snprintf(req, sizeof req, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 60000\r\n\r\n");
    memset(req + head, 'x', 60000);
    req[head + 60000] = '\0';
    rig_requests(r, req, 1);
    rig_budget(r, 2);
    io.write_cap = 100;
    inject_write(2, IO_WANT_WRITE, 0);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, 100), 100);
    peer_write(r, "HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    RUN_UNTIL(r, r->stats.requests == 1 && r->stats.connects == 2, 500);
    CHECK_U64(r->stats.requests, 1);
    CHECK_U64(r->stats.status[413], 1);
    CHECK_U64(r->stats.reconnects, 1);
    CHECK_U64(r->stats.errors.write + r->stats.errors.read, 0);
    CHECK_U64(r->stats.connects, 2);
    rig_free(r);
}

TEST(idle_close_during_a_pause_reopens_only_when_it_ends)
{
    struct rig *r = rig_new();
    r->cfg.hooks.delay = rig_delay;
    r->live.delay = true;
    r->delay_ms = 0;
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    r->delay_ms = 150;
    peer_write(r, OK);
    RUN_UNTIL(r, r->stats.requests == 1, 500);
    close(r->peer); /* the server closes the idle connection */
    r->peer = -1;
    RUN_UNTIL(r, r->stats.reconnects == 1, 500);
    uint64_t closed_at = clock_us();
    CHECK_U64(r->stats.reconnects, 1);
    spin(r, 20);
    CHECK_U64(r->stats.connects, 1); /* not reopened while the pause runs */
    CHECK(accept_peer(r));
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    CHECK_U64(r->stats.connects, 2);
    CHECK(clock_us() - closed_at >= 100000);
    CHECK_U64(r->stats.errors.read, 0);
    rig_free(r);
}

TEST(held_bytes_that_are_no_data_do_not_hold_back_the_next_request)
{
    struct rig *r = rig_new();
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    /* The read that brings the response leaves bytes inside the transport
     * (TLS: a session ticket behind it), and reading them gives no data. */
    io.held_after = io.reads + 1;
    inject_read(io.reads + 2, IO_WANT_READ, 0);
    peer_write(r, OK);
    RUN_UNTIL(r, r->stats.sent == 2, 300);
    CHECK_U64(r->stats.requests, 1);
    CHECK_U64(r->stats.sent, 2);
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    rig_free(r);
}

TEST(timeout_counts_every_request_in_flight)
{
    struct rig *r = rig_new();
    rig_requests(r, GET, 2);
    r->cfg.timeout_us = 50000;
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    RUN_UNTIL(r, r->stats.errors.timeout > 0, 1000);
    CHECK_U64(r->stats.errors.timeout, 2);
    CHECK_U64(r->stats.causes[CAUSE_RESPONSE_TIMEOUT], 2);
    rig_free(r);
}

TEST(bytes_nobody_asked_for_are_an_error_that_ends_no_request)
{
    struct rig *r = rig_new();
    rig_budget(r, 2);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    peer_write(r, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA");
    RUN_UNTIL(r, r->stats.causes[CAUSE_UNEXPECTED] > 0, 500);
    CHECK_U64(r->stats.requests, 1);
    /* They came with nothing in flight: the connection is dropped and the
     * error counted under its cause, but it was no request's outcome. */
    CHECK_U64(r->stats.causes[CAUSE_UNEXPECTED], 1);
    CHECK_U64(r->stats.errors.read, 0);
    /* The second request goes on a new connection: two outcomes for -n 2. */
    CHECK(accept_peer(r));
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    peer_write(r, OK);
    RUN_UNTIL(r, r->spent, 500);
    CHECK(r->spent);
    CHECK_U64(r->stats.requests, 2);
    CHECK_U64(r->stats.errors.read, 0);
    rig_free(r);
}

TEST(a_stray_crlf_after_a_body_is_not_an_error)
{
    struct rig *r = rig_new();
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    peer_write(r, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\r\n");
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    peer_write(r, "\r\n");
    peer_write(r, OK);
    RUN_UNTIL(r, r->stats.requests == 2, 500);
    CHECK_U64(r->stats.requests, 2);
    CHECK_U64(r->stats.errors.read, 0);
    CHECK_U64(r->stats.connects, 1);
    rig_free(r);
}

TEST(failed_connects_under_n_are_outcomes_and_end_the_run)
{
    struct rig *r = rig_new();
    rig_budget(r, 5);
    close(r->listener);
    unlink(r->path);
    r->listener = socket(AF_UNIX, SOCK_STREAM, 0); /* closed at the end */
    conn_start(&r->conn, true);
    RUN_UNTIL(r, r->spent, 1000);
    CHECK(r->spent);
    CHECK_U64(r->stats.errors.connect, 5);
    CHECK_U64(r->stats.causes[CAUSE_REFUSED], 5);
    /* Nothing is left to send: no further attempt. */
    spin(r, 20);
    CHECK_U64(r->stats.errors.connect, 5);
    CHECK_U64(r->conn.state, CONN_CLOSED);
    rig_free(r);
}

TEST(failed_connects_without_n_back_off)
{
    struct rig *r = rig_new();
    close(r->listener);
    unlink(r->path);
    r->listener = socket(AF_UNIX, SOCK_STREAM, 0);
    conn_start(&r->conn, true);
    RUN_UNTIL(r, false, 200);
    /* 1 ms doubling: about 8 attempts in 200 ms, not thousands. */
    CHECK(r->stats.errors.connect >= 3 && r->stats.errors.connect <= 10);
    rig_free(r);
}

TEST(stop_hands_requests_in_flight_back_to_the_budget)
{
    struct rig *r = rig_new();
    rig_requests(r, GET, 2);
    rig_budget(r, 10);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, 2 * strlen(GET)), 2 * strlen(GET));
    CHECK_U64(atomic_load(&r->budget.unsent), 8);
    conn_stop(&r->conn);
    CHECK_U64(atomic_load(&r->budget.unsent), 10);
    CHECK_U64(atomic_load(&r->budget.unresolved), 10);
    rig_free(r);
}

TEST(one_read_event_reads_a_bounded_amount)
{
    struct rig *r = rig_new();
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    char buf[256];
    CHECK_U64(peer_read(r, buf, strlen(GET)), strlen(GET));
    int big = 4 << 20;
    setsockopt(r->peer, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    peer_write(r, "HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n");
    static char body[1000000];
    memset(body, 'b', sizeof body - 1);
    peer_write(r, body);
    unsigned before = io.reads;
    ev_run(r->cfg.loop, EVRUN_NOWAIT);
    /* One turn reads at most 256 KiB (64 KiB at a time) from one socket. */
    CHECK(io.reads - before <= 5);
    CHECK(io.reads - before >= 1);
    rig_free(r);
}

/* ---- HTTP/2: the test plays the server with nghttp2's own server session ------------------- */

#include <nghttp2/nghttp2.h>

struct h2srv {
    struct rig *r;
    nghttp2_session *ng;
    int32_t requests[256]; /* streams whose request is complete, in order */
    size_t nrequests;
    size_t open, max_open; /* streams open at once */
    size_t data_in;        /* request body bytes */
    unsigned settings_acks, ping_acks;
};

static ssize_t srv_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *arg)
{
    (void)ng, (void)flags;
    struct h2srv *h = arg;
    char *copy = xmalloc(len + 1);
    memcpy(copy, data, len);
    copy[len] = '\0';
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(h->r->peer, copy + off, len - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    free(copy);
    return (ssize_t)len;
}

static int srv_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
    (void)ng, (void)f;
    struct h2srv *h = arg;
    if (++h->open > h->max_open)
        h->max_open = h->open;
    return 0;
}

static int srv_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
    (void)ng;
    struct h2srv *h = arg;
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) && h->nrequests < 256)
        h->requests[h->nrequests++] = f->hd.stream_id;
    if (f->hd.type == NGHTTP2_SETTINGS && (f->hd.flags & NGHTTP2_FLAG_ACK))
        h->settings_acks++;
    if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK))
        h->ping_acks++;
    return 0;
}

static int srv_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                    void *arg)
{
    (void)ng, (void)flags, (void)id, (void)data;
    struct h2srv *h = arg;
    h->data_in += len;
    return 0;
}

static int srv_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
    (void)ng, (void)id, (void)code;
    struct h2srv *h = arg;
    h->open--;
    return 0;
}

/* The server side of the connection just accepted: its SETTINGS allow
 * max_streams streams (0 for none said). */
static struct h2srv *srv_new(struct rig *r, uint32_t max_streams)
{
    struct h2srv *h = xcalloc(1, sizeof *h);
    nghttp2_session_callbacks *cb;
    h->r = r;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, srv_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, srv_begin_headers);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, srv_stream_close);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, srv_data);
    nghttp2_session_server_new(&h->ng, cb, h);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams};
    nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, &iv, max_streams ? 1 : 0);
    nghttp2_session_send(h->ng);
    return h;
}

static void srv_free(struct h2srv *h)
{
    nghttp2_session_del(h->ng);
    free(h);
}

/* Reads what the client sent and sends what the server has to, until cond
 * holds or ms pass, turning the client's loop meanwhile. */
#define SRV_UNTIL(h, cond, ms)                                                                     \
    do {                                                                                           \
        uint64_t srv_end_ = clock_us() + (ms)*1000ULL;                                             \
        while (!(cond) && clock_us() < srv_end_)                                                   \
            srv_turn(h);                                                                           \
    } while (0)

static void srv_turn(struct h2srv *h)
{
    char buf[16384];
    spin(h->r, 1);
    struct pollfd p = {.fd = h->r->peer, .events = POLLIN};
    if (poll(&p, 1, 1) == 1) {
        ssize_t n = read(h->r->peer, buf, sizeof buf);
        if (n > 0)
            nghttp2_session_mem_recv(h->ng, (const uint8_t *)buf, (size_t)n);
    }
    nghttp2_session_send(h->ng);
}

static ssize_t srv_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *arg)
{
    (void)ng, (void)id, (void)arg;
    const char *body = src->ptr;
    size_t n = strlen(body) < len ? strlen(body) : len;
    memcpy(buf, body, n);
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE         \
    }

static void srv_answer(struct h2srv *h, int32_t id)
{
    static char body[] = "ok";
    nghttp2_nv nv[] = {NV(":status", "200"), NV("Content-Type", "text/plain"),
                       NV("x-volley", "Yes: really")};
    nghttp2_data_provider prd = {.source.ptr = body, .read_callback = srv_body};
    nghttp2_submit_response(h->ng, id, nv, 3, &prd);
    nghttp2_session_send(h->ng);
}

static void srv_refuse(struct h2srv *h, int32_t id)
{
    nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
}

/* Serves until -n's budget is spent, or for 2 s: the requests from the
 * first'th on, as they come, are answered, or refused when refuse says so
 * of their place in the order (counted from 0). */
static void srv_until_spent(struct h2srv *h, size_t first, bool (*refuse)(size_t i))
{
    uint64_t end = clock_us() + 2000000;
    size_t done = first;
    while (!h->r->spent && clock_us() < end) {
        srv_turn(h);
        for (; done < h->nrequests; done++) {
            if (refuse && refuse(done))
                srv_refuse(h, h->requests[done]);
            else
                srv_answer(h, h->requests[done]);
        }
    }
}

static struct rig *rig_h2(size_t streams, uint64_t budget)
{
    struct rig *r = rig_new_proto(&proto_h2, streams);
    if (budget)
        rig_budget(r, budget);
    return r;
}

TEST(h2_streams_go_out_together_capped_by_the_server)
{
    struct rig *r = rig_h2(8, 12);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 4);
    srv_until_spent(h, 0, NULL);
    CHECK(r->spent);
    CHECK_U64(r->stats.requests, 12);
    CHECK_U64(h->nrequests, 12);
    /* Before the server's SETTINGS came, the first batch went out whole
     * (nghttp2 assumes 100); after them, never more than 4 at once. */
    CHECK(h->max_open >= 4);
    CHECK_U64(r->stats.h2_streams, 4);
    CHECK_U64(r->stats.h2_settings, 1);
    CHECK_U64(r->stats.connects, 1);
    CHECK_U64(r->stats.errors.read + r->stats.errors.timeout, 0);
    CHECK(h->settings_acks >= 1);
    srv_free(h);
    rig_free(r);
}

TEST(h2_one_write_carries_a_whole_batch_of_streams)
{
    struct rig *r = rig_h2(16, 0);
    r->cfg.timeout_us = 10000000;
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    spin(r, 20);
    /* The preface and SETTINGS, then the 16 HEADERS frames in one write. */
    CHECK_U64(io.writes, 2);
    CHECK_U64(r->stats.sent, 16);
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 16, 1000);
    CHECK_U64(h->nrequests, 16);
    srv_free(h);
    rig_free(r);
}

TEST(h2_goaway_sends_unprocessed_requests_again)
{
    struct rig *r = rig_h2(4, 6);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 4, 1000);
    CHECK_U64(h->nrequests, 4);
    srv_answer(h, h->requests[0]);
    srv_answer(h, h->requests[1]);
    /* Processed up to the second stream: the third and fourth were not. */
    nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, h->requests[1], NGHTTP2_NO_ERROR, NULL, 0);
    nghttp2_session_send(h->ng);
    RUN_UNTIL(r, r->stats.reconnects == 1, 1000);
    CHECK_U64(r->stats.requests, 2);
    CHECK_U64(r->stats.h2_goaways, 1);
    CHECK_U64(r->stats.h2_refused, 2);
    CHECK_U64(r->stats.errors.read, 0);
    /* The connection drained and closed: the rest goes on a new one. */
    srv_free(h);
    CHECK(accept_peer(r));
    h = srv_new(r, 100);
    srv_until_spent(h, 0, NULL);
    CHECK(r->spent);
    CHECK_U64(h->nrequests, 4);
    CHECK_U64(r->stats.requests, 6);
    CHECK_U64(r->stats.sent, 8);
    CHECK_U64(r->stats.errors.read + r->stats.errors.timeout, 0);
    srv_free(h);
    rig_free(r);
}

TEST(h2_refused_stream_is_sent_again_and_a_reset_one_counted)
{
    struct rig *r = rig_h2(2, 3);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 2, 1000);
    srv_refuse(h, h->requests[0]);
    nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, h->requests[1], NGHTTP2_CANCEL);
    nghttp2_session_send(h->ng);
    srv_until_spent(h, 2, NULL);
    CHECK(r->spent);
    /* Three outcomes: the cancelled one an error, then two answers. */
    CHECK_U64(h->nrequests, 4);
    CHECK_U64(r->stats.requests, 2);
    CHECK_U64(r->stats.errors.read, 1);
    CHECK_U64(r->stats.causes[CAUSE_STREAM_RESET], 1);
    CHECK_U64(r->stats.h2_refused, 1);
    CHECK_U64(r->stats.h2_resets[NGHTTP2_REFUSED_STREAM], 1);
    CHECK_U64(r->stats.h2_resets[NGHTTP2_CANCEL], 1);
    CHECK_U64(r->stats.connects, 1); /* a stream's reset keeps the connection */
    srv_free(h);
    rig_free(r);
}

static bool every(size_t i)
{
    (void)i;
    return true;
}

TEST(h2_requests_refused_again_and_again_become_errors)
{
    /* -m2, -n 3: a server that refuses every stream. Each connection's
     * requests go again 3 times per stream (6 refusals), then each refusal
     * is a refused_stream error, until 3 outcomes end the run. */
    struct rig *r = rig_h2(2, 3);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    srv_until_spent(h, 0, every);
    CHECK(r->spent);
    CHECK_U64(r->stats.requests, 0);
    CHECK_U64(r->stats.errors.read, 3);
    CHECK_U64(r->stats.causes[CAUSE_REFUSED_STREAM], 3);
    CHECK_U64(r->stats.h2_refused, 6 + 3);
    CHECK_U64(h->nrequests, 6 + 3);
    CHECK_U64(r->stats.sent, 6 + 3);
    CHECK_U64(r->stats.connects, 1);
    srv_free(h);
    rig_free(r);
}

static bool but_the_third_and_sixth(size_t i) { return i != 2 && i != 5; }

TEST(h2_a_response_ends_a_run_of_refusals)
{
    /* Refused twice, then answered, then refused twice again: the count
     * starts afresh after the response, so nothing is an error. */
    struct rig *r = rig_h2(1, 2);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    srv_until_spent(h, 0, but_the_third_and_sixth);
    CHECK(r->spent);
    CHECK_U64(r->stats.requests, 2);
    CHECK_U64(r->stats.errors.read, 0);
    CHECK_U64(r->stats.h2_refused, 4);
    CHECK_U64(h->nrequests, 6);
    srv_free(h);
    rig_free(r);
}

TEST(h2_acknowledgements_go_out_with_no_request)
{
    struct rig *r = rig_h2(1, 0);
    rig_budget(r, 0); /* nothing to send */
    conn_start(&r->conn, false);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    nghttp2_submit_ping(h->ng, NGHTTP2_FLAG_NONE, (const uint8_t *)"12345678");
    nghttp2_session_send(h->ng);
    SRV_UNTIL(h, h->settings_acks && h->ping_acks, 1000);
    CHECK_U64(h->settings_acks, 1);
    CHECK_U64(h->ping_acks, 1);
    CHECK_U64(h->nrequests, 0);
    CHECK_U64(r->stats.sent, 0);
    srv_free(h);
    rig_free(r);
}

TEST(h2_settings_never_acknowledged_time_out)
{
    struct rig *r = rig_h2(1, 0);
    r->cfg.timeout_us = 50000;
    conn_start(&r->conn, true);
    CHECK(accept_peer(r)); /* a peer that reads and never says a thing */
    RUN_UNTIL(r, r->stats.errors.timeout > 0, 1000);
    CHECK_U64(r->stats.errors.timeout, 1);
    CHECK_U64(r->stats.causes[CAUSE_SETTINGS_TIMEOUT], 1);
    rig_free(r);
}

TEST(h2_oldest_stream_times_out_alone)
{
    struct rig *r = rig_h2(2, 2);
    r->cfg.timeout_us = 100000;
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 2);
    SRV_UNTIL(h, h->nrequests == 2, 1000);
    srv_answer(h, h->requests[1]);
    RUN_UNTIL(r, r->stats.errors.timeout > 0, 1000);
    CHECK_U64(r->stats.requests, 1);
    CHECK_U64(r->stats.errors.timeout, 1);
    CHECK_U64(r->stats.causes[CAUSE_RESPONSE_TIMEOUT], 1);
    srv_free(h);
    rig_free(r);
}

TEST(h2_server_allowing_no_stream_times_out_as_such)
{
    struct rig *r = rig_h2(1, 1);
    atomic_store(&r->budget.unsent, 0); /* held back until the SETTINGS are in */
    r->cfg.timeout_us = 100000;
    conn_start(&r->conn, false);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 0);
    nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 0};
    nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, &iv, 1);
    SRV_UNTIL(h, r->stats.h2_settings == 2 && h->settings_acks, 1000);
    CHECK_U64(r->stats.h2_streams, 0);
    atomic_store(&r->budget.unsent, 1);
    conn_kick(&r->conn); /* now a request may go: it gets no stream */
    RUN_UNTIL(r, r->stats.errors.timeout > 0, 1000);
    CHECK_U64(h->nrequests, 0);
    CHECK_U64(r->stats.errors.timeout, 1);
    CHECK_U64(r->stats.causes[CAUSE_STREAM_LIMIT], 1);
    srv_free(h);
    rig_free(r);
}

TEST(h2_garbage_is_a_protocol_error)
{
    struct rig *r = rig_h2(1, 0);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    peer_write(r, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    RUN_UNTIL(r, r->stats.errors.read > 0, 1000);
    CHECK_U64(r->stats.errors.read, 1);
    CHECK_U64(r->stats.causes[CAUSE_H2_PROTOCOL], 1);
    CHECK_U64(r->stats.requests, 0);
    rig_free(r);
}

TEST(h2_close_with_streams_in_flight_counts_each)
{
    struct rig *r = rig_h2(3, 0);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 3, 1000);
    close(r->peer);
    r->peer = -1;
    RUN_UNTIL(r, r->stats.errors.read > 0, 1000);
    CHECK_U64(r->stats.errors.read, 3);
    CHECK_U64(r->stats.causes[CAUSE_CLOSED], 3);
    srv_free(h);
    rig_free(r);
}

TEST(h2_response_hook_gets_lower_case_fields_and_the_body)
{
    struct rig *r = rig_h2(1, 1);
    r->live.wants.head = r->live.wants.body = true;
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 1, 1000);
    srv_answer(h, h->requests[0]);
    RUN_UNTIL(r, r->spent, 1000);
    CHECK_U64(r->responses_seen, 1);
    CHECK_STR(r->fields_seen, "content-type: text/plain\r\nx-volley: Yes: really\r\n");
    CHECK_STR(r->body_seen, "ok");
    CHECK(r->lower_seen);
    CHECK_U64(r->stats.status[200], 1);
    srv_free(h);
    rig_free(r);
}

TEST(h2_fields_that_cannot_be_lines_are_left_out_of_the_hook)
{
    /* A CR in a value, a space in a name: not lines the hook could read.
     * As nghttp2 does for h2load and curl, the fields are left out, and the
     * response counts as any other. */
    struct rig *r = rig_h2(1, 1);
    r->live.wants.head = true;
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 1, 1000);
    nghttp2_nv nv[] = {NV(":status", "200"), NV("x-cr", "a\rb"), NV("x a", "1"),
                       NV("x-ok", "fine")};
    nghttp2_submit_response(h->ng, h->requests[0], nv, 4, NULL);
    nghttp2_session_send(h->ng);
    RUN_UNTIL(r, r->spent, 1000);
    CHECK_U64(r->stats.requests, 1);
    CHECK_U64(r->stats.errors.read, 0);
    CHECK_STR(r->fields_seen, "x-ok: fine\r\n");
    srv_free(h);
    rig_free(r);
}

TEST(h2_request_body_goes_out_in_data_frames)
{
    struct rig *r = rig_h2(1, 1);
    char req[40100];
    int head =
        snprintf(req, sizeof req, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 40000\r\n\r\n");
    memset(req + head, 'x', 40000);
    req[head + 40000] = '\0';
    rig_requests(r, req, 1);
    io.write_cap = 1000; /* short writes all along */
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 1, 2000);
    CHECK_U64(h->nrequests, 1);
    CHECK_U64(h->data_in, 40000);
    srv_answer(h, h->requests[0]);
    RUN_UNTIL(r, r->spent, 1000);
    CHECK_U64(r->stats.requests, 1);
    CHECK(io.writes >= 40);
    srv_free(h);
    rig_free(r);
}

TEST(h2_interim_responses_are_skipped)
{
    struct rig *r = rig_h2(1, 1);
    r->live.wants.head = true;
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 1, 1000);
    nghttp2_nv hints[] = {NV(":status", "103"), NV("link", "</s.css>; rel=preload")};
    nghttp2_submit_headers(h->ng, NGHTTP2_FLAG_NONE, h->requests[0], NULL, hints, 2, NULL);
    nghttp2_session_send(h->ng);
    srv_answer(h, h->requests[0]);
    RUN_UNTIL(r, r->spent, 1000);
    CHECK_U64(r->stats.requests, 1);
    CHECK_U64(r->stats.status[200], 1);
    CHECK_U64(r->stats.status[103], 0);
    CHECK_STR(r->fields_seen, "content-type: text/plain\r\nx-volley: Yes: really\r\n");
    srv_free(h);
    rig_free(r);
}

TEST(h2_response_without_a_status_is_malformed)
{
    struct rig *r = rig_h2(1, 1);
    conn_start(&r->conn, true);
    CHECK(accept_peer(r));
    struct h2srv *h = srv_new(r, 100);
    SRV_UNTIL(h, h->nrequests == 1, 1000);
    nghttp2_nv nv[] = {NV("content-type", "text/plain")};
    nghttp2_submit_response(h->ng, h->requests[0], nv, 1, NULL);
    nghttp2_session_send(h->ng);
    RUN_UNTIL(r, r->spent, 1000);
    CHECK_U64(r->stats.requests, 0);
    CHECK_U64(r->stats.errors.read, 1);
    CHECK_U64(r->stats.causes[CAUSE_H2_PROTOCOL], 1);
    CHECK_U64(r->stats.connects, 1); /* the stream's error, not the connection's */
    srv_free(h);
    rig_free(r);
}
