/* The set-up of a tunnel through a proxy, one non-blocking step at a time:
 * what a connection writes to the proxy, and how much of its answer it
 * reads. It never reads past the proxy's answer: what follows belongs to
 * the target (SOCKS5 answers have a known length; a CONNECT answer's head
 * is looked at before it is taken).
 * SPDX-License-Identifier: MIT */
#include "tunnel.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "buf.h"
#include "net.h"
#include "transport.h"
#include "xalloc.h"

/* A CONNECT answer's head may be this long; no proxy's is near it. */
#define HEAD_MAX 16384

/* RFC 1928 §3: version 5, then the methods offered: none, and user name
 * and password (RFC 1929) when there are credentials. */
static const char greeting_plain[] = "\x05\x01\x00";
static const char greeting_auth[] = "\x05\x02\x00\x02";

enum {
    /* CONNECT */
    HTTP_REQUEST = 0,
    HTTP_ANSWER,
    /* SOCKS5 */
    SOCKS_GREETING = 0,
    SOCKS_METHOD,
    SOCKS_AUTH,
    SOCKS_AUTH_STATUS,
    SOCKS_REQUEST,
    SOCKS_REPLY,
    SOCKS_NAME_LENGTH,
    SOCKS_BOUND,
};

/* ------------------------------------------------------------------------ */
/* The messages                                                               */
/* ------------------------------------------------------------------------ */

void tunnel_http(struct tunnel *t, const char *host, const char *service, const char *user,
                 const char *password)
{
    bool v6 = strchr(host, ':') != NULL;
    struct buf b = {0};
    memset(t, 0, sizeof *t);
    t->kind = TUNNEL_HTTP;
    t->target = xasprintf("%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", service);
    char *head = xasprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n", t->target, t->target);
    buf_append(&b, head, strlen(head));
    free(head);
    if (user) {
        char *pair = xasprintf("%s:%s", user, password ? password : "");
        buf_append(&b, "Proxy-Authorization: Basic ", 27);
        buf_append_base64(&b, pair, strlen(pair));
        buf_append(&b, "\r\n", 2);
        free(pair);
    }
    buf_append(&b, "\r\n", 2);
    t->request = b.data;
    t->request_len = b.len;
}

/* A length-prefixed field of SOCKS5 (a name) or of RFC 1929 (a user name,
 * a password): 1 to 255 bytes. */
static bool counted(struct buf *b, const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255)
        return false;
    unsigned char len = (unsigned char)n;
    buf_append(b, &len, 1);
    buf_append(b, s, n);
    return true;
}

/* RFC 1929 §2: version 1, the user name, the password. */
static bool socks_auth(struct tunnel *t, const char *user, const char *password, const char **why)
{
    struct buf b = {0};
    buf_append(&b, "\x01", 1);
    if (!counted(&b, user) || !counted(&b, password ? password : "")) {
        buf_free(&b);
        *why = "a SOCKS5 user name and password have 1 to 255 bytes each";
        return false;
    }
    t->auth = b.data;
    t->auth_len = b.len;
    return true;
}

bool tunnel_socks5(struct tunnel *t, const char *host, const char *service,
                   const struct net_addr *addr, const char *user, const char *password,
                   const char **why)
{
    struct buf b = {0};
    unsigned long port = strtoul(service, NULL, 10);
    unsigned char be_port[2] = {(unsigned char)(port >> 8), (unsigned char)port};
    memset(t, 0, sizeof *t);
    t->kind = TUNNEL_SOCKS5;
    /* RFC 1928 §4: version, CONNECT, reserved, then the address */
    buf_append(&b, "\x05\x01\x00", 3);
    if (addr) {
        char *shown = net_addr_str(addr);
        t->target = xasprintf("%s (%s:%s)", shown, host, service);
        free(shown);
        if (addr->sa.ss_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&addr->sa;
            buf_append(&b, "\x04", 1);
            buf_append(&b, &in6->sin6_addr, 16);
        } else {
            const struct sockaddr_in *in = (const struct sockaddr_in *)&addr->sa;
            buf_append(&b, "\x01", 1);
            buf_append(&b, &in->sin_addr, 4);
        }
    } else {
        t->target = xasprintf("%s:%s", host, service);
        buf_append(&b, "\x03", 1);
        if (!counted(&b, host)) {
            buf_free(&b);
            tunnel_free(t);
            *why = "a host name sent to a SOCKS5 proxy has at most 255 bytes";
            return false;
        }
    }
    buf_append(&b, be_port, 2);
    t->request = b.data;
    t->request_len = b.len;
    if (user && !socks_auth(t, user, password, why)) {
        tunnel_free(t);
        return false;
    }
    return true;
}

void tunnel_free(struct tunnel *t)
{
    free(t->request);
    free(t->auth);
    free(t->target);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------ */
/* The steps                                                                  */
/* ------------------------------------------------------------------------ */

/* A socket call that failed: wait, or the proxy is gone. */
static int socket_failed(bool reading, enum cause *cause)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return reading ? IO_WANT_READ : IO_WANT_WRITE;
    *cause = CAUSE_PROXY_CLOSED;
    return IO_ERROR;
}

/* recv() from the proxy: the bytes it gave (> 0), or an io_result (IO_ERROR
 * with *cause when the proxy closed or failed). */
static ssize_t take(int fd, char *buf, size_t len, int flags, enum cause *cause)
{
    for (;;) {
        ssize_t n = recv(fd, buf, len, flags);
        if (n > 0)
            return n;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return socket_failed(true, cause);
        *cause = CAUSE_PROXY_CLOSED;
        return IO_ERROR;
    }
}

/* Write the rest of msg; then the next step starts. */
static int put(int fd, struct tunnel_conn *tc, const char *msg, size_t len, enum cause *cause)
{
    while (tc->done < len) {
        ssize_t n = send(fd, msg + tc->done, len - tc->done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return socket_failed(false, cause);
        tc->done = (uint16_t)(tc->done + n);
    }
    tc->done = 0;
    tc->step++;
    return IO_OK;
}

/* Read the answer up to its byte want (at most 262: a SOCKS5 reply with a
 * name), the first of them into head. */
static int get(int fd, struct tunnel_conn *tc, size_t want, enum cause *cause)
{
    char buf[264];
    while (tc->done < want) {
        ssize_t n = take(fd, buf, want - tc->done, 0, cause);
        if (n < 0)
            return (int)n;
        for (size_t i = 0; i < (size_t)n && tc->done + i < sizeof tc->head; i++)
            tc->head[tc->done + i] = buf[i];
        tc->done = (uint16_t)(tc->done + n);
    }
    return IO_OK;
}

/* Whether c ends the head: an empty line, after CRLF or a bare LF (RFC
 * 9112 §2.2 lets a recipient take LF alone as a line's end). eol: 1 at a
 * line's start, 2 after a CR there. */
static bool head_ends(struct tunnel_conn *tc, char c)
{
    if (c == '\n') {
        if (tc->eol)
            return true;
        tc->eol = 1;
    } else {
        tc->eol = c == '\r' && tc->eol == 1 ? 2 : 0;
    }
    return false;
}

/* The status line, "HTTP/1.1 200 ...": a 2xx opens the tunnel (RFC 9110
 * §9.3.6); 407 is the credentials', and so is 401, which only the proxy
 * can answer a CONNECT with (tinyproxy does, for wrong ones). */
static int connect_status(struct tunnel_conn *tc, enum cause *cause)
{
    const char *h = tc->head;
    if (tc->done < 12 || memcmp(h, "HTTP/", 5) != 0 || h[6] != '.' || h[8] != ' ' || h[9] < '1' ||
        h[9] > '5' || h[10] < '0' || h[10] > '9' || h[11] < '0' || h[11] > '9') {
        *cause = CAUSE_PROXY_PROTOCOL;
        return IO_ERROR;
    }
    tc->status = (uint16_t)((h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0'));
    if (tc->status / 100 == 2)
        return IO_OK;
    *cause = tc->status == 407 || tc->status == 401 ? CAUSE_PROXY_AUTH : CAUSE_PROXY_STATUS;
    return IO_ERROR;
}

/* The CONNECT answer's head, taken as far as it has come: what the socket
 * holds is looked at first, and only the head's bytes are taken from it. */
static int connect_answer(int fd, struct tunnel_conn *tc, enum cause *cause)
{
    char buf[2048];
    for (;;) {
        ssize_t n = take(fd, buf, sizeof buf, MSG_PEEK, cause);
        if (n < 0)
            return (int)n;
        size_t i = 0;
        bool end = false;
        while (i < (size_t)n && !end) {
            if (tc->done + i < sizeof tc->head)
                tc->head[tc->done + i] = buf[i];
            end = head_ends(tc, buf[i++]);
        }
        if (recv(fd, buf, i, 0) != (ssize_t)i)
            return socket_failed(true, cause);
        if (tc->done + i > HEAD_MAX || (tc->done + i >= 5 && memcmp(tc->head, "HTTP/", 5) != 0)) {
            *cause = CAUSE_PROXY_PROTOCOL;
            return IO_ERROR;
        }
        tc->done = (uint16_t)(tc->done + i);
        if (end)
            return connect_status(tc, cause);
    }
}

static int http_step(const struct tunnel *t, struct tunnel_conn *tc, int fd, enum cause *cause)
{
    int rc = IO_OK;
    if (tc->step == HTTP_REQUEST)
        rc = put(fd, tc, t->request, t->request_len, cause);
    return rc == IO_OK ? connect_answer(fd, tc, cause) : rc;
}

/* RFC 1928 §6: the reply codes past success, each a cause of its own. */
static enum cause socks_cause(unsigned char code)
{
    static const enum cause causes[] = {
        CAUSE_SOCKS_FAILURE,          CAUSE_SOCKS_NOT_ALLOWED,  CAUSE_SOCKS_NETWORK_UNREACHABLE,
        CAUSE_SOCKS_HOST_UNREACHABLE, CAUSE_SOCKS_REFUSED,      CAUSE_SOCKS_TTL_EXPIRED,
        CAUSE_SOCKS_COMMAND,          CAUSE_SOCKS_ADDRESS_TYPE,
    };
    return code >= 1 && code <= 8 ? causes[code - 1] : CAUSE_PROXY_PROTOCOL;
}

/* The method the proxy chose from those offered: none, or user name and
 * password; 0xff when it takes none of them (it wants credentials). */
static int socks_method(const struct tunnel *t, struct tunnel_conn *tc, enum cause *cause)
{
    unsigned char method = (unsigned char)tc->head[1];
    tc->done = 0;
    if (tc->head[0] != 5 || (method != 0 && method != 2 && method != 0xff)) {
        *cause = CAUSE_PROXY_PROTOCOL;
        return IO_ERROR;
    }
    if (method == 0xff || (method == 2 && !t->auth)) {
        *cause = CAUSE_PROXY_AUTH;
        return IO_ERROR;
    }
    tc->step = method == 2 ? SOCKS_AUTH : SOCKS_REQUEST;
    return IO_OK;
}

/* The reply's first four bytes: version, code, reserved, the type of the
 * bound address that follows (which is read and left). */
static int socks_reply(struct tunnel_conn *tc, enum cause *cause)
{
    unsigned char code = (unsigned char)tc->head[1], type = (unsigned char)tc->head[3];
    tc->status = code;
    if (tc->head[0] != 5 || (code == 0 && type != 1 && type != 3 && type != 4)) {
        *cause = CAUSE_PROXY_PROTOCOL;
        return IO_ERROR;
    }
    if (code != 0) {
        *cause = socks_cause(code);
        return IO_ERROR;
    }
    tc->step = type == 3 ? SOCKS_NAME_LENGTH : SOCKS_BOUND;
    tc->need = type == 1 ? 4 + 4 + 2 : type == 4 ? 4 + 16 + 2 : 5;
    return IO_OK;
}

static int socks_step(const struct tunnel *t, struct tunnel_conn *tc, int fd, enum cause *cause)
{
    int rc = IO_OK;
    while (rc == IO_OK) {
        switch (tc->step) {
        case SOCKS_GREETING:
            rc = t->auth ? put(fd, tc, greeting_auth, sizeof greeting_auth - 1, cause)
                         : put(fd, tc, greeting_plain, sizeof greeting_plain - 1, cause);
            break;
        case SOCKS_METHOD:
            if ((rc = get(fd, tc, 2, cause)) == IO_OK)
                rc = socks_method(t, tc, cause);
            break;
        case SOCKS_AUTH:
            rc = put(fd, tc, t->auth, t->auth_len, cause);
            break;
        case SOCKS_AUTH_STATUS:
            /* RFC 1929 §2: status 0 is success; the version is 1, though
             * some proxies say 5 */
            if ((rc = get(fd, tc, 2, cause)) != IO_OK)
                break;
            if (tc->head[1] != 0) {
                *cause = CAUSE_PROXY_AUTH;
                return IO_ERROR;
            }
            tc->done = 0;
            tc->step++;
            break;
        case SOCKS_REQUEST:
            rc = put(fd, tc, t->request, t->request_len, cause);
            break;
        case SOCKS_REPLY:
            if ((rc = get(fd, tc, 4, cause)) == IO_OK)
                rc = socks_reply(tc, cause);
            break;
        case SOCKS_NAME_LENGTH:
            if ((rc = get(fd, tc, 5, cause)) == IO_OK) {
                tc->need = (uint16_t)(5 + (unsigned char)tc->head[4] + 2);
                tc->step = SOCKS_BOUND;
            }
            break;
        default: /* SOCKS_BOUND: the address the proxy connected from */
            return get(fd, tc, tc->need, cause);
        }
    }
    return rc;
}

int tunnel_step(const struct tunnel *t, struct tunnel_conn *tc, int fd, enum cause *cause)
{
    return t->kind == TUNNEL_HTTP ? http_step(t, tc, fd, cause) : socks_step(t, tc, fd, cause);
}

int tunnel_wait(const struct tunnel *t, struct tunnel_conn *tc, int fd, uint64_t deadline,
                enum cause *cause)
{
    int rc;
    tunnel_begin(tc);
    while ((rc = tunnel_step(t, tc, fd, cause)) == IO_WANT_READ || rc == IO_WANT_WRITE)
        if (!net_wait(fd, rc == IO_WANT_READ ? POLLIN : POLLOUT, deadline))
            break;
    return rc;
}

/* RFC 1928 §6's words for the reply codes. */
static const char *const socks_replies[] = {
    "general SOCKS server failure", "connection not allowed by ruleset",
    "network unreachable",          "host unreachable",
    "connection refused",           "TTL expired",
    "command not supported",        "address type not supported",
};

void tunnel_failure(const struct tunnel *t, const struct tunnel_conn *tc, enum cause cause,
                    char *buf, size_t len)
{
    bool http = t->kind == TUNNEL_HTTP;
    switch (cause) {
    case CAUSE_PROXY_CLOSED:
        snprintf(buf, len, "the proxy closed the connection before the tunnel was up");
        break;
    case CAUSE_PROXY_PROTOCOL:
        snprintf(buf, len, "the proxy's answer is not %s", http ? "HTTP/1.1" : "SOCKS5");
        break;
    case CAUSE_PROXY_AUTH:
        if (http)
            snprintf(buf, len, "the proxy answered CONNECT with status %u (%s)", tc->status,
                     memmem(t->request, t->request_len, "Proxy-Authorization:", 20)
                         ? "it refused the user name and password"
                         : "it wants a user name and password in the proxy's URL");
        else if (tc->step == SOCKS_METHOD)
            snprintf(buf, len, "the SOCKS5 proxy %s",
                     t->auth ? "accepts neither no authentication nor a user name and password"
                             : "wants a user name and password in the proxy's URL");
        else
            snprintf(buf, len, "the SOCKS5 proxy refused the user name and password");
        break;
    case CAUSE_PROXY_STATUS:
        snprintf(buf, len, "the proxy answered CONNECT with status %u", tc->status);
        break;
    default:
        snprintf(buf, len, "the SOCKS5 proxy answered '%s' (reply code %u)",
                 tc->status >= 1 && tc->status <= 8 ? socks_replies[tc->status - 1] : "?",
                 tc->status);
        break;
    }
}
