/* What HTTP/2 checks before a run starts: that a request can go as HEADERS
 * and DATA frames, and that a cleartext target speaks HTTP/2 at all.
 * SPDX-License-Identifier: MIT */
#include "h2_start.h"

#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2req.h"
#include "net.h"
#include "route.h"

/* Over HTTP/2 a request is HEADERS (and DATA) frames made from its bytes:
 * fields HTTP/2 forbids, a Host that no :authority can stand for, or a
 * header block over what nghttp2 sends, cannot go. */
bool h2_check_request(const struct request *r, bool tls, char *err, size_t errlen)
{
    struct h2req check = {0};
    bool ok = h2req_build(&check, r, tls, err, errlen) && h2req_fits(&check, err, errlen);
    h2req_free(&check);
    return ok;
}

/* What the target answers the client's preface with (the magic, then an
 * empty SETTINGS frame): up to cap - 1 bytes, until the end of a status line
 * or as soon as the answer is plainly no HTTP/1. Returns how many. */
static size_t preface_reply(const struct route *route, uint64_t deadline, char *reply, size_t cap)
{
    static const char preface[] = NGHTTP2_CLIENT_MAGIC "\0\0\0\4\0\0\0\0\0";
    size_t got = 0;
    char why[256];
    int fd = route_dial(route, deadline, why, sizeof why);
    if (fd < 0)
        return 0;
    if (send(fd, preface, sizeof preface - 1, MSG_NOSIGNAL) == (ssize_t)sizeof preface - 1) {
        while (got < cap - 1 && !memchr(reply, '\n', got) &&
               (got < 5 || memcmp(reply, "HTTP/", 5) == 0) && net_wait(fd, POLLIN, deadline)) {
            ssize_t n = recv(fd, reply + got, cap - 1 - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
    }
    close(fd);
    return got;
}

/* An HTTP/1.1 server reads the preface as a request ("PRI * HTTP/2.0") and
 * answers it with an error response (RFC 9113 §3.4); an HTTP/2 server
 * answers with its SETTINGS. Anything else (nothing, a close, garbage) is
 * left to the run, which counts it. */
bool h2_probe(const struct route *route, uint64_t deadline, char *why, size_t len)
{
    char reply[80] = "";
    size_t got = preface_reply(route, deadline, reply, sizeof reply), n = 0;
    if (got < 5 || memcmp(reply, "HTTP/", 5) != 0)
        return true;
    while (n < got && reply[n] >= 0x20 && reply[n] < 0x7f) /* its status line */
        n++;
    snprintf(why, len,
             "does not speak HTTP/2 in cleartext (it answered the connection preface with "
             "'%.*s')",
             (int)n, reply);
    return false;
}
