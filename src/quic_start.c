/* The start-up check over QUIC: a handshake through the transport's own
 * operations, waited for with poll() and QUIC's timers.
 * SPDX-License-Identifier: MIT */
#include "quic_start.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "net.h"
#include "quic.h"

bool quic_probe(const struct net_addr *addr, int timeout_ms, char *why, size_t why_len)
{
    bool in_progress;
    int fd = net_connect(addr, SOCK_DGRAM, &in_progress);
    if (fd < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        return false;
    }
    struct sock s = {.fd = fd};
    uint64_t deadline = clock_us() + (uint64_t)timeout_ms * 1000;
    bool ok = false;
    for (;;) {
        int rv = transport_quic.handshake(&s);
        if (rv == IO_OK) {
            quic_measured(quic_of(&s));
            ok = true;
            break;
        }
        if (rv == IO_ERROR) {
            quic_describe(quic_of(&s), why, why_len);
            break;
        }
        /* Until the deadline, or QUIC's next timer (a retransmission). */
        uint64_t now = clock_us(), wait = deadline > now ? deadline - now : 0;
        uint64_t expiry = quic_expiry_us(quic_of(&s));
        if (expiry != UINT64_MAX && expiry < now + wait)
            wait = expiry > now ? expiry - now : 0;
        struct pollfd p = {.fd = fd, .events = rv == IO_WANT_WRITE ? POLLOUT : POLLIN};
        int ready = poll(&p, 1, (int)((wait + 999) / 1000));
        if (ready < 0 && errno != EINTR) {
            quic_describe(quic_of(&s), why, why_len);
            break;
        }
        if (ready == 0 && clock_us() >= deadline) {
            snprintf(why, why_len, "no QUIC handshake in %dms", timeout_ms);
            break;
        }
        if (ready == 0 && !quic_expire(quic_of(&s))) {
            quic_describe(quic_of(&s), why, why_len);
            break;
        }
    }
    transport_quic.release(&s);
    close(fd);
    return ok;
}
