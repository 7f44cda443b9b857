/* The tunnel through a proxy, step by step on a socket pair: what volley
 * writes (CONNECT, the SOCKS5 messages), the proxy's answers fed split at
 * every byte, the bytes after them left for the target, and each failure's
 * cause; and an http URL's requests put in absolute-form.
 * SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "net.h"
#include "proxy.h"
#include "transport.h"
#include "tunnel.h"
#include "unit.h"
#include "xalloc.h"

/* volley's end (non-blocking, as a connection's) and the proxy's. */
struct pair {
    int ours, theirs;
};

static struct pair pair_new(void)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
        abort();
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    return (struct pair){fds[0], fds[1]};
}

static void pair_free(struct pair *p)
{
    close(p->ours);
    if (p->theirs >= 0)
        close(p->theirs);
}

/* What volley wrote to the proxy so far, as a string. */
static const char *written(struct pair *p)
{
    static char buf[1024];
    ssize_t n = read(p->theirs, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void answer(struct pair *p, const char *bytes, size_t n)
{
    if (n && write(p->theirs, bytes, n) != (ssize_t)n)
        abort();
}

/* What the target's side of the socket holds after the tunnel: all of it. */
static const char *left(struct pair *p)
{
    static char buf[64];
    ssize_t n = recv(p->ours, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* The answer fed in two parts, split at k; returns the outcome. */
static int fed_split(const struct tunnel *t, const char *reply, size_t len, size_t k,
                     struct pair *p, enum cause *cause)
{
    struct tunnel_conn tc;
    tunnel_begin(&tc);
    (void)tunnel_step(t, &tc, p->ours, cause); /* the request goes out */
    answer(p, reply, k);
    int rc = tunnel_step(t, &tc, p->ours, cause);
    answer(p, reply + k, len - k);
    if (rc == IO_WANT_READ)
        rc = tunnel_step(t, &tc, p->ours, cause);
    return rc;
}

#define CONNECT_ANSWER "HTTP/1.1 200 Connection established\r\nProxy-agent: x\r\n\r\n"

TEST(connect_request_with_and_without_credentials)
{
    struct tunnel t;
    struct tunnel_conn tc;
    enum cause cause;
    struct pair p = pair_new();
    tunnel_http(&t, "::1", "8443", NULL, NULL);
    tunnel_begin(&tc);
    CHECK(tunnel_step(&t, &tc, p.ours, &cause) == IO_WANT_READ);
    CHECK_STR(written(&p), "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n");
    tunnel_free(&t);
    pair_free(&p);
    p = pair_new();
    tunnel_http(&t, "example.com", "443", "Aladdin", "open sesame");
    tunnel_begin(&tc);
    CHECK(tunnel_step(&t, &tc, p.ours, &cause) == IO_WANT_READ);
    /* RFC 7617's example */
    CHECK_STR(written(&p), "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
                           "Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n");
    tunnel_free(&t);
    pair_free(&p);
}

TEST(connect_answer_split_at_every_byte_leaves_the_targets_bytes)
{
    const char reply[] = CONNECT_ANSWER "\x16\x03\x01";
    size_t head = sizeof CONNECT_ANSWER - 1;
    struct tunnel t;
    tunnel_http(&t, "127.0.0.1", "443", NULL, NULL);
    for (size_t k = 0; k <= head; k++) {
        struct pair p = pair_new();
        enum cause cause;
        if (fed_split(&t, reply, sizeof reply - 1, k, &p, &cause) != IO_OK)
            UNIT_FAIL("split at %zu: not up", k);
        CHECK_STR(left(&p), "\x16\x03\x01");
        pair_free(&p);
    }
    tunnel_free(&t);
}

TEST(connect_answer_a_byte_at_a_time)
{
    const char reply[] = "HTTP/1.0 200 OK\n\n";
    struct tunnel t;
    struct tunnel_conn tc;
    enum cause cause;
    struct pair p = pair_new();
    tunnel_http(&t, "127.0.0.1", "443", NULL, NULL);
    tunnel_begin(&tc);
    int rc = tunnel_step(&t, &tc, p.ours, &cause);
    for (size_t i = 0; i < sizeof reply - 1; i++) {
        CHECK(rc == IO_WANT_READ);
        answer(&p, reply + i, 1);
        rc = tunnel_step(&t, &tc, p.ours, &cause);
    }
    CHECK(rc == IO_OK); /* bare LFs end lines too */
    pair_free(&p);
    tunnel_free(&t);
}

static enum cause refused(const char *reply, unsigned *status)
{
    struct tunnel t;
    struct pair p = pair_new();
    enum cause cause = CAUSE_COUNT;
    tunnel_http(&t, "127.0.0.1", "443", NULL, NULL);
    struct tunnel_conn tc;
    tunnel_begin(&tc);
    tunnel_step(&t, &tc, p.ours, &cause);
    if (reply)
        answer(&p, reply, strlen(reply));
    else
        shutdown(p.theirs, SHUT_WR);
    if (tunnel_step(&t, &tc, p.ours, &cause) != IO_ERROR)
        cause = CAUSE_COUNT;
    *status = tc.status;
    pair_free(&p);
    tunnel_free(&t);
    return cause;
}

TEST(connect_refusals_and_what_is_no_answer)
{
    unsigned status;
    CHECK(refused("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", &status) ==
          CAUSE_PROXY_AUTH);
    CHECK_U64(status, 407);
    CHECK(refused("HTTP/1.0 401 Unauthorized\r\n\r\n", &status) == CAUSE_PROXY_AUTH);
    CHECK(refused("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad", &status) ==
          CAUSE_PROXY_STATUS);
    CHECK_U64(status, 502);
    CHECK(refused("SSH-2.0-OpenSSH_9.2\r\n", &status) == CAUSE_PROXY_PROTOCOL);
    CHECK(refused("HTTP/1.1 2xx OK\r\n\r\n", &status) == CAUSE_PROXY_PROTOCOL);
    CHECK(refused("HTTP/1.1 200\r\n\r\n", &status) == CAUSE_COUNT); /* no reason phrase: fine */
    CHECK(refused(NULL, &status) == CAUSE_PROXY_CLOSED);
    CHECK(refused("HTTP/1.1 200 OK\r\n", &status) == CAUSE_COUNT); /* not yet: waits */
}

TEST(connect_answer_past_16_kib_is_no_answer)
{
    struct tunnel t;
    struct tunnel_conn tc;
    enum cause cause;
    struct pair p = pair_new();
    char line[1024];
    memset(line, 'a', sizeof line);
    memcpy(line, "X: ", 3);
    line[sizeof line - 2] = '\r';
    line[sizeof line - 1] = '\n';
    tunnel_http(&t, "127.0.0.1", "443", NULL, NULL);
    tunnel_begin(&tc);
    tunnel_step(&t, &tc, p.ours, &cause);
    answer(&p, "HTTP/1.1 200 OK\r\n", 17);
    int rc = IO_WANT_READ;
    for (int i = 0; i < 20 && rc == IO_WANT_READ; i++) {
        answer(&p, line, sizeof line);
        rc = tunnel_step(&t, &tc, p.ours, &cause);
    }
    CHECK(rc == IO_ERROR && cause == CAUSE_PROXY_PROTOCOL);
    pair_free(&p);
    tunnel_free(&t);
}

/* ---- SOCKS5 ---------------------------------------------------------------------------- */

TEST(socks5_by_address_without_credentials_split_at_every_byte)
{
    struct net_addr a = {.len = sizeof(struct sockaddr_in)};
    struct sockaddr_in *in = (struct sockaddr_in *)&a.sa;
    const char *why;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(0x7f000001);
    struct tunnel t;
    CHECK(tunnel_socks5(&t, "localhost", "8080", &a, NULL, NULL, &why));
    /* the method chosen (none), then the reply with its bound IPv4 address */
    const char reply[] = "\x05\x00"
                         "\x05\x00\x00\x01\x7f\x00\x00\x01\x30\x39"
                         "GO";
    size_t n = sizeof reply - 1;
    for (size_t k = 0; k < n - 2; k++) {
        struct pair p = pair_new();
        struct tunnel_conn tc;
        enum cause cause;
        tunnel_begin(&tc);
        int rc = tunnel_step(&t, &tc, p.ours, &cause);
        CHECK(rc == IO_WANT_READ);
        CHECK(memcmp(written(&p), "\x05\x01\x00", 4) == 0);
        answer(&p, reply, k);
        rc = tunnel_step(&t, &tc, p.ours, &cause);
        answer(&p, reply + k, n - k);
        if (rc == IO_WANT_READ)
            rc = tunnel_step(&t, &tc, p.ours, &cause);
        if (rc != IO_OK)
            UNIT_FAIL("split at %zu: not up", k);
        /* the CONNECT request: IPv4, 127.0.0.1, port 8080 */
        CHECK(memcmp(written(&p), "\x05\x01\x00\x01\x7f\x00\x00\x01\x1f\x90", 10) == 0);
        CHECK_STR(left(&p), "GO");
        pair_free(&p);
    }
    tunnel_free(&t);
}

/* Run a SOCKS5 set-up against the proxy's answers, given all at once;
 * what volley wrote goes to out. */
static int socks_exchange(const struct tunnel *t, const char *replies, size_t n, char *out,
                          size_t *out_len, enum cause *cause, unsigned *status)
{
    struct pair p = pair_new();
    struct tunnel_conn tc;
    tunnel_begin(&tc);
    answer(&p, replies, n);
    int rc = tunnel_step(t, &tc, p.ours, cause);
    ssize_t got = read(p.theirs, out, 512);
    *out_len = got > 0 ? (size_t)got : 0;
    *status = tc.status;
    pair_free(&p);
    return rc;
}

TEST(socks5_by_name_with_credentials)
{
    struct tunnel t;
    const char *why;
    char out[512];
    size_t len;
    enum cause cause;
    unsigned status;
    CHECK(tunnel_socks5(&t, "web.example", "443", NULL, "alice", "secret", &why));
    /* user name and password chosen and accepted; the reply's bound
     * address is a name (4 bytes, then the 3 of "abc", then the port) */
    const char ok[] = "\x05\x02"
                      "\x01\x00"
                      "\x05\x00\x00\x03\x03"
                      "abc\x00\x50";
    CHECK(socks_exchange(&t, ok, sizeof ok - 1, out, &len, &cause, &status) == IO_OK);
    const char expect[] = "\x05\x02\x00\x02"
                          "\x01\x05"
                          "alice\x06"
                          "secret"
                          "\x05\x01\x00\x03\x0b"
                          "web.example\x01\xbb";
    CHECK_U64(len, sizeof expect - 1);
    CHECK(memcmp(out, expect, sizeof expect - 1) == 0);
    CHECK(socks_exchange(&t, "\x05\x02\x01\x01", 4, out, &len, &cause, &status) == IO_ERROR);
    CHECK(cause == CAUSE_PROXY_AUTH);
    CHECK(socks_exchange(&t, "\x05\xff", 2, out, &len, &cause, &status) == IO_ERROR);
    CHECK(cause == CAUSE_PROXY_AUTH);
    CHECK(socks_exchange(&t, "\x05\x02\x01\x00\x05\x05\x00\x01", 8, out, &len, &cause, &status) ==
          IO_ERROR);
    CHECK(cause == CAUSE_SOCKS_REFUSED);
    CHECK_U64(status, 5);
    CHECK(socks_exchange(&t, "\x05\x02\x01\x00\x05\x09\x00\x01", 8, out, &len, &cause, &status) ==
          IO_ERROR);
    CHECK(cause == CAUSE_PROXY_PROTOCOL); /* a reply code RFC 1928 has not */
    CHECK(socks_exchange(&t, "HTTP/1.1 400", 12, out, &len, &cause, &status) == IO_ERROR);
    CHECK(cause == CAUSE_PROXY_PROTOCOL);
    tunnel_free(&t);
    /* without credentials, a proxy that wants them */
    CHECK(tunnel_socks5(&t, "web.example", "443", NULL, NULL, NULL, &why));
    CHECK(socks_exchange(&t, "\x05\x02", 2, out, &len, &cause, &status) == IO_ERROR);
    CHECK(cause == CAUSE_PROXY_AUTH);
    tunnel_free(&t);
}

TEST(socks5_limits)
{
    struct tunnel t;
    const char *why;
    char name[300];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    CHECK(!tunnel_socks5(&t, name, "80", NULL, NULL, NULL, &why));
    CHECK_STR(why, "a host name sent to a SOCKS5 proxy has at most 255 bytes");
    CHECK(!tunnel_socks5(&t, "h", "80", NULL, name, "p", &why));
    CHECK_STR(why, "a SOCKS5 user name and password have 1 to 255 bytes each");
}

/* ---- absolute-form ----------------------------------------------------------------------- */

static const char *absolute(const char *requests, bool credentials)
{
    static struct buf out;
    struct proxy p;
    const char *why;
    struct url target;
    if (!proxy_parse(&p, credentials ? "http://u:p@proxy:3128" : "http://proxy:3128", &why) ||
        !url_parse("http://[::1]:8080/x", &target, &why))
        abort();
    p.origin = xstrdup("http://[::1]:8080");
    if (credentials)
        p.authorization = xstrdup("Proxy-Authorization: Basic dTpw\r\n");
    proxy_absolute_form(&p, requests, strlen(requests), &out);
    proxy_free(&p);
    url_free(&target);
    return out.data;
}

TEST(absolute_form)
{
    CHECK_STR(absolute("GET /a?b HTTP/1.1\r\nHost: h\r\n\r\n", false),
              "GET http://[::1]:8080/a?b HTTP/1.1\r\nHost: h\r\n\r\n");
    /* pipelined, with a body, and the credentials after each request line */
    CHECK_STR(absolute("\r\nPOST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
                       "HEAD /h HTTP/1.1\r\n\r\n",
                       true),
              "\r\nPOST http://[::1]:8080/ HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n"
              "Content-Length: 2\r\n\r\nhi"
              "HEAD http://[::1]:8080/h HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\r\n");
    /* a script's own Proxy-Authorization, and a target already absolute */
    CHECK_STR(absolute("GET http://other/ HTTP/1.1\r\nproxy-authorization: x\r\n\r\n", true),
              "GET http://other/ HTTP/1.1\r\nproxy-authorization: x\r\n\r\n");
    /* OPTIONS * asks about the server: its authority alone (RFC 9112 §3.2.4) */
    CHECK_STR(absolute("OPTIONS * HTTP/1.1\r\n\r\n", false),
              "OPTIONS http://[::1]:8080 HTTP/1.1\r\n\r\n");
    /* what is no request goes as it is */
    CHECK_STR(absolute("GET / HTTP/1.1\r\n\r\nnot a request", false),
              "GET http://[::1]:8080/ HTTP/1.1\r\n\r\nnot a request");
}
