/* Fuzz target for a proxy's answers to the tunnel's set-up (src/tunnel.c):
 * the answer bytes are fed through a socket pair the way a connection reads
 * them, whole and one byte at a time. Both feedings must end the same way
 * (up, failed with the same cause and status, or waiting for more), the
 * tunnel's set-up must never take a byte past the proxy's answer (what
 * follows is the target's: both leave the same bytes in the socket), and a
 * CONNECT's answer is taken up to its empty line and no further.
 *
 * Input: byte 0 = the tunnel (bit 0: SOCKS5 rather than CONNECT, bit 1:
 * with credentials), then the proxy's answer.
 * SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "stats.h"
#include "transport.h"
#include "tunnel.h"

/* More than a CONNECT answer's head may be, less than a socket pair holds. */
#define MAX_ANSWER 20000

struct outcome {
    int rc;
    enum cause cause;
    unsigned status;
    size_t left; /* bytes the set-up did not take */
};

static void drain(int fd)
{
    char buf[4096];
    while (read(fd, buf, sizeof buf) > 0)
        ;
}

static size_t unread(int fd)
{
    char buf[MAX_ANSWER + 1];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? (size_t)n : 0;
}

/* Feed answer in pieces of step bytes (0: all at once). */
static struct outcome feed(const struct tunnel *t, const uint8_t *answer, size_t len, size_t step)
{
    int fds[2];
    struct outcome o = {IO_WANT_READ, CAUSE_COUNT, 0, 0};
    struct tunnel_conn tc;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
        abort();
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    tunnel_begin(&tc);
    size_t fed = 0;
    o.rc = tunnel_step(t, &tc, fds[0], &o.cause);
    while (o.rc == IO_WANT_READ && fed < len) {
        size_t n = step && len - fed > step ? step : len - fed;
        drain(fds[1]); /* what volley wrote */
        FUZZ_CHECK(write(fds[1], answer + fed, n) == (ssize_t)n);
        fed += n;
        o.rc = tunnel_step(t, &tc, fds[0], &o.cause);
    }
    FUZZ_CHECK(o.rc == IO_OK || o.rc == IO_ERROR || o.rc == IO_WANT_READ);
    if (o.rc == IO_ERROR)
        FUZZ_CHECK(o.cause < CAUSE_COUNT);
    o.status = tc.status;
    o.left = unread(fds[0]) + (len - fed);
    close(fds[0]);
    close(fds[1]);
    return o;
}

/* Where a CONNECT answer's head ends: past its empty line (CRLF or LF). */
static size_t head_end(const uint8_t *a, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (a[i] != '\n')
            continue;
        size_t j = i + 1 < len && a[i + 1] == '\r' ? i + 2 : i + 1;
        if (j < len && a[j] == '\n')
            return j + 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tunnel t;
    const char *why;
    if (size < 1 || size - 1 > MAX_ANSWER)
        return 0;
    bool socks = data[0] & 1, auth = data[0] & 2;
    if (socks)
        tunnel_socks5(&t, "target.example", "443", NULL, auth ? "user" : NULL, "password", &why);
    else
        tunnel_http(&t, "target.example", "443", auth ? "user" : NULL, "password");
    const uint8_t *answer = data + 1;
    size_t len = size - 1;
    struct outcome whole = feed(&t, answer, len, 0), bytes = feed(&t, answer, len, 1);
    FUZZ_CHECK(whole.rc == bytes.rc);
    /* (after a failure what is left does not matter: the connection ends) */
    if (whole.rc == IO_ERROR)
        FUZZ_CHECK(whole.cause == bytes.cause && whole.status == bytes.status);
    else
        FUZZ_CHECK(whole.left == bytes.left);
    if (whole.rc == IO_OK && !socks)
        FUZZ_CHECK(len - whole.left == head_end(answer, len));
    tunnel_free(&t);
    return 0;
}
