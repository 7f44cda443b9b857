/* The io_uring engine (uring.h). One ring per worker, submitted to from the
 * worker's thread only (SINGLE_ISSUER), its completions run when the worker
 * asks for them (DEFER_TASKRUN), where the kernel has both. A turn submits
 * what the connections queued and reaps what completed, a few rounds while
 * completions keep coming, then gives the loop back; the registered eventfd
 * wakes the loop when there is more, and is kept quiet during a turn so
 * that completions reaped at once cost no wake-up. Each completion carries
 * its link's index, the generation of the socket it was for and what it
 * was, so what comes back for a socket already closed is dropped (its
 * buffer given back).
 * Built without liburing, the engine is not there and uring_usable() says so.
 * SPDX-License-Identifier: MIT */
#include "uring.h"

#include <stdio.h>

#include "xalloc.h"

#ifdef VOLLEY_URING

#include <errno.h>
#include <ev.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "net.h"

/* What a completion was for: the low bits of its user_data, above them the
 * socket's generation, and the link's index in the top half. */
enum op { OP_CONNECT = 1, OP_RECV, OP_SEND, OP_CANCEL, OP_CLOSE };
#define OP_BITS 4
#define GEN_MASK 0x0fffffffu
/* Rounds of submitting and reaping in one turn while completions keep
 * coming, before the loop gets to run its timers and the -R schedule. */
#define ROUNDS 8
/* The buffer group of the ring's one provided-buffer ring. */
#define BGID 0
/* The receive buffers: at least one per connection up to BUFS_MAX, in
 * BUFS_BYTES in all (the pages a small response never reaches are never
 * touched), each between BUF_MIN and BUF_MAX bytes. Past BUFS_MAX
 * connections, one that finds none left is armed again at once. */
#define BUFS_MIN 64
#define BUFS_MAX 512
#define BUFS_BYTES (4u << 20)
#define BUF_MIN (8u << 10)
#define BUF_MAX (64u << 10)
/* uring_finish's wait for the kernel to let go of the buffers. */
#define FINISH_US 1000000

struct uring {
    struct io_uring ring;
    struct ev_loop *loop;
    int efd;           /* the ring's completion eventfd */
    ev_io wake;        /* the loop's watcher of efd */
    ev_prepare before; /* submits what was queued before the loop sleeps */
    ev_idle again;     /* a turn that ended with work left runs once more */
    struct io_uring_buf_ring *br;
    size_t br_bytes;
    char *bufs;
    size_t bufs_bytes;
    unsigned nbufs, buf_size;
    unsigned lent; /* buffers given back since the last publication */
    struct uring_link **links;
    size_t nlinks;
    struct uring_link *queue, **queue_tail; /* links to gather, in order */
    size_t inflight; /* requests submitted or queued whose last completion is to come */
};

static unsigned pow2_at_least(size_t n)
{
    unsigned p = 1;
    while (p < n && p < (1u << 30))
        p <<= 1;
    return p;
}

/* ------------------------------------------------------------------------ */
/* Setting up                                                                 */
/* ------------------------------------------------------------------------ */

/* How the rings are set up, best first: one issuer, whose completions run
 * when it asks for them (6.1), with the flag that says some are waiting;
 * or the default, where the kernel interrupts the thread to run them.
 * uring_usable() picks the first this kernel takes and keeps working. */
static const unsigned modes[] = {
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
    0,
};
static unsigned mode; /* set by uring_usable() before any worker exists */

/* Returns 0 or a negative errno. */
static int ring_init(struct io_uring *ring, unsigned flags, unsigned entries, unsigned cq_entries)
{
    struct io_uring_params p = {0};
    p.flags = flags | IORING_SETUP_CQSIZE;
    p.cq_entries = cq_entries;
    return io_uring_queue_init_params(entries, ring, &p);
}

/* Pages of their own, touched only when used: the buffers a small response
 * never fills cost no memory. */
static void *map(size_t bytes)
{
    /* cppcheck-suppress invalidFunctionArg ; MAP_ANONYMOUS takes fd -1 */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* cppcheck-suppress memleak ; the caller unmaps it */
    return p == MAP_FAILED ? NULL : p;
}

/* The provided-buffer ring of nbufs buffers of size bytes, registered and
 * full. Returns 0 or a negative errno. */
static int provide(struct io_uring *ring, struct io_uring_buf_ring **br, char **bufs,
                   unsigned nbufs, unsigned size)
{
    size_t br_bytes = (size_t)nbufs * sizeof(struct io_uring_buf);
    *br = map(br_bytes);
    *bufs = map((size_t)nbufs * size);
    if (!*br || !*bufs)
        return -ENOMEM;
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)*br, .ring_entries = nbufs, .bgid = BGID};
    int rc = io_uring_register_buf_ring(ring, &reg, 0);
    if (rc < 0)
        return rc;
    io_uring_buf_ring_init(*br);
    for (unsigned i = 0; i < nbufs; i++)
        io_uring_buf_ring_add(*br, *bufs + (size_t)i * size, size, (unsigned short)i,
                              io_uring_buf_ring_mask(nbufs), (int)i);
    io_uring_buf_ring_advance(*br, (int)nbufs);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The probe                                                                  */
/* ------------------------------------------------------------------------ */

static bool refused(char *why, size_t len, const char *what, int err)
{
    snprintf(why, len, "%s: %s", what, strerror(err));
    return false;
}

/* One completion, waiting at most a second. */
static int probe_wait(struct io_uring *ring, struct io_uring_cqe **cqe)
{
    struct __kernel_timespec ts = {.tv_sec = 1};
    return io_uring_submit_and_wait_timeout(ring, cqe, 1, &ts, NULL);
}

/* What the engine relies on, tried on a socket pair: a multishot receive
 * into provided buffers that goes on after its first completion, the
 * eventfd signalled as soon as data comes (with completions deferred until
 * asked for, the kernel signals work to run, from 6.2 on), a send, and a
 * cancel by file descriptor. */
static bool probe_ring(struct io_uring *ring, int efd, int sv[2], char *why, size_t len)
{
    struct io_uring_cqe *cqe;
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    io_uring_prep_recv_multishot(sqe, sv[0], NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    sqe->user_data = OP_RECV;
    if (io_uring_submit(ring) != 1)
        return refused(why, len, "submitting a receive", EIO);
    uint64_t count = 0;
    if (write(sv[1], "volley", 6) != 6)
        return refused(why, len, "a socket pair", errno);
    if (read(efd, &count, sizeof count) != sizeof count || count == 0)
        return refused(why, len, "its eventfd stays quiet when data comes", ENOTSUP);
    int rc = probe_wait(ring, &cqe);
    if (rc < 0)
        return refused(why, len, "a multishot receive", -rc);
    if (cqe->res < 0)
        return refused(why, len, "a multishot receive", -cqe->res);
    if (cqe->res != 6 || !(cqe->flags & IORING_CQE_F_BUFFER) || !(cqe->flags & IORING_CQE_F_MORE))
        return refused(why, len, "a multishot receive into provided buffers", ENOTSUP);
    io_uring_cqe_seen(ring, cqe);
    sqe = io_uring_get_sqe(ring);
    io_uring_prep_send(sqe, sv[1], "!", 1, MSG_NOSIGNAL);
    sqe->user_data = OP_SEND;
    sqe = io_uring_get_sqe(ring);
    io_uring_prep_cancel_fd(sqe, sv[0], IORING_ASYNC_CANCEL_ALL);
    sqe->user_data = OP_CANCEL;
    for (int seen = 0; seen < 3; seen++) { /* the send, the data, the cancelled receive */
        if ((rc = probe_wait(ring, &cqe)) < 0)
            return refused(why, len, "a send and a cancel", -rc);
        if (cqe->user_data == OP_CANCEL && cqe->res < 0)
            return refused(why, len, "a cancel by file descriptor", -cqe->res);
        if (cqe->user_data == OP_SEND && cqe->res != 1)
            return refused(why, len, "a send", cqe->res < 0 ? -cqe->res : EIO);
        io_uring_cqe_seen(ring, cqe);
    }
    return true;
}

/* One mode, tried on a ring of its own. */
static bool try_mode(unsigned flags, char *why, size_t len)
{
    struct io_uring ring;
    struct io_uring_buf_ring *br = NULL;
    char *bufs = NULL;
    int sv[2] = {-1, -1}, efd = -1;
    bool ok = false;
    /* io_uring_setup refused: not in this kernel (ENOSYS), turned off by
     * kernel.io_uring_disabled or a seccomp profile (EPERM), or a flag it
     * does not know (EINVAL). */
    int rc = ring_init(&ring, flags, 8, 16);
    if (rc < 0)
        return refused(why, len, "io_uring_setup", -rc);
    if ((rc = provide(&ring, &br, &bufs, 4, 4096)) < 0)
        refused(why, len, "a provided-buffer ring", -rc);
    else if ((efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
             (rc = io_uring_register_eventfd(&ring, efd)) < 0)
        refused(why, len, "an eventfd", efd < 0 ? errno : -rc);
    else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        refused(why, len, "a socket pair", errno);
    else
        ok = probe_ring(&ring, efd, sv, why, len);
    io_uring_queue_exit(&ring);
    for (int i = 0; i < 2; i++)
        if (sv[i] >= 0)
            close(sv[i]);
    if (efd >= 0)
        close(efd);
    if (br)
        munmap(br, 4 * sizeof *br);
    if (bufs)
        munmap(bufs, 4 * 4096);
    return ok;
}

bool uring_usable(char *why, size_t len)
{
    /* The reason given is the best mode's: the fallback's are the same or
     * say less. */
    char first[160] = "";
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        if (try_mode(modes[i], why, len)) {
            mode = modes[i];
            return true;
        }
        if (i == 0)
            snprintf(first, sizeof first, "%s", why);
    }
    snprintf(why, len, "%s", first);
    return false;
}

/* ------------------------------------------------------------------------ */
/* Submitting                                                                 */
/* ------------------------------------------------------------------------ */

static uint64_t tag(const struct uring_link *l, enum op op)
{
    return (uint64_t)l->index << 32 | (uint64_t)(l->gen & GEN_MASK) << OP_BITS | op;
}

/* A free submission entry, submitting what is queued when there is none;
 * the request it becomes is in flight until its last completion. */
static struct io_uring_sqe *entry(struct uring *r, uint64_t user_data)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (!sqe) {
        io_uring_submit(&r->ring);
        sqe = io_uring_get_sqe(&r->ring);
        if (!sqe)
            die("io_uring: the submission queue stays full");
    }
    r->inflight++;
    io_uring_sqe_set_data64(sqe, user_data);
    return sqe;
}

static void enqueue(struct uring_link *l)
{
    struct uring *r = l->ring;
    if (l->queued)
        return;
    l->queued = true;
    l->next = NULL;
    *r->queue_tail = l;
    r->queue_tail = &l->next;
}

/* The connect was started by connect() itself (route_open), not by the
 * ring: one that finds no free local port scans the kernel's whole range
 * first (13 ms for 64k ports), and a turn's worth of them submitted at once
 * all ran their scans before the first failure came back, where one call
 * at a time lets the address wait after the first (sources_full); 16
 * threads of 9,000 such connects kept two cores busy for minutes. The ring
 * waits for the connection to be writable, and SO_ERROR tells how it went. */
static void start_connect(struct uring_link *l)
{
    io_uring_prep_poll_add(entry(l->ring, tag(l, OP_CONNECT)), l->fd, POLLOUT);
}

static void start_recv(struct uring_link *l)
{
    struct io_uring_sqe *sqe = entry(l->ring, tag(l, OP_RECV));
    io_uring_prep_recv_multishot(sqe, l->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    l->receiving = true;
}

static void start_send(struct uring_link *l)
{
    const char *data;
    size_t len = l->sink->output(l->arg, &data);
    if (len == 0)
        return;
    struct io_uring_sqe *sqe = entry(l->ring, tag(l, OP_SEND));
    /* MSG_NOSIGNAL: a peer that closed gives EPIPE, not SIGPIPE. */
    io_uring_prep_send(sqe, l->fd, data, len, MSG_NOSIGNAL);
    l->sending = true;
}

/* The turn's sends and receives to arm, one entry per link at most each. */
static void gather(struct uring *r)
{
    struct uring_link *l;
    while ((l = r->queue) != NULL) {
        r->queue = l->next;
        if (!r->queue)
            r->queue_tail = &r->queue;
        l->queued = false;
        if (l->fd < 0)
            continue;
        if (l->want_recv && !l->receiving)
            start_recv(l);
        if (l->want_send && !l->sending)
            start_send(l);
        l->want_recv = l->want_send = false;
    }
}

void uring_link_init(struct uring_link *l, struct uring *r, size_t index,
                     const struct uring_sink *sink, void *arg)
{
    memset(l, 0, sizeof *l);
    l->ring = r;
    l->sink = sink;
    l->arg = arg;
    l->index = (uint32_t)index;
    l->fd = -1;
    r->links[index] = l;
}

void uring_connect(struct uring_link *l, int fd)
{
    l->gen = (l->gen + 1) & GEN_MASK;
    l->fd = fd;
    /* The send still in flight on the slot's earlier socket may be reading
     * bytes the connection is about to reuse (its session's output buffer,
     * the request it refills): the new connection waits for it. */
    if (l->sending)
        l->connect_waits = true;
    else
        start_connect(l);
}

void uring_receive(struct uring_link *l)
{
    l->want_recv = true;
    enqueue(l);
}

void uring_send(struct uring_link *l)
{
    l->want_send = true;
    enqueue(l);
}

void uring_close(struct uring_link *l)
{
    if (l->fd < 0)
        return;
    struct uring *r = l->ring;
    /* Closing the descriptor would leave the receive armed on the socket,
     * which the request holds: cancel everything on it first (the entries
     * run in order). */
    io_uring_prep_cancel_fd(entry(r, tag(l, OP_CANCEL)), l->fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_prep_close(entry(r, tag(l, OP_CLOSE)), l->fd);
    l->fd = -1;
    l->connect_waits = false;
    l->receiving = l->want_recv = l->want_send = false;
    l->gen = (l->gen + 1) & GEN_MASK;
}

/* ------------------------------------------------------------------------ */
/* Reaping                                                                    */
/* ------------------------------------------------------------------------ */

static void give_back(struct uring *r, unsigned bid)
{
    io_uring_buf_ring_add(r->br, r->bufs + (size_t)bid * r->buf_size, r->buf_size,
                          (unsigned short)bid, io_uring_buf_ring_mask(r->nbufs), (int)r->lent++);
}

static void received(struct uring *r, struct uring_link *l, const struct io_uring_cqe *cqe,
                     bool current, uint64_t now)
{
    bool more = cqe->flags & IORING_CQE_F_MORE;
    bool buffer = cqe->flags & IORING_CQE_F_BUFFER;
    unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
    if (current && !more)
        l->receiving = false;
    if (current) {
        uint32_t gen = l->gen;
        if (cqe->res > 0 && buffer)
            l->sink->input(l->arg, r->bufs + (size_t)bid * r->buf_size, (size_t)cqe->res, now);
        else if (cqe->res == 0)
            l->sink->eof(l->arg);
        else if (cqe->res < 0 && cqe->res != -ENOBUFS && cqe->res != -ECANCELED)
            l->sink->read_failed(l->arg, -cqe->res);
        /* Out of buffers, or ended by a full completion queue: armed again
         * once this turn's buffers are back. */
        if ((cqe->res > 0 || cqe->res == -ENOBUFS) && l->gen == gen && l->fd >= 0 && !l->receiving)
            uring_receive(l);
    }
    if (buffer)
        give_back(r, bid);
}

static void sent(struct uring_link *l, const struct io_uring_cqe *cqe, bool current)
{
    l->sending = false;
    if (current) {
        if (cqe->res >= 0)
            l->sink->wrote(l->arg, (size_t)cqe->res);
        else
            l->sink->write_failed(l->arg, -cqe->res);
    } else if (l->connect_waits) {
        l->connect_waits = false;
        start_connect(l);
    }
}

static void complete(struct uring *r, const struct io_uring_cqe *cqe, uint64_t now)
{
    uint64_t data = io_uring_cqe_get_data64(cqe);
    enum op op = (enum op)(data & ((1u << OP_BITS) - 1));
    struct uring_link *l = r->links[data >> 32];
    bool current = l->fd >= 0 && (uint32_t)(data >> OP_BITS & GEN_MASK) == l->gen;
    if (!(op == OP_RECV && (cqe->flags & IORING_CQE_F_MORE)))
        r->inflight--;
    switch (op) {
    case OP_RECV:
        received(r, l, cqe, current, now);
        break;
    case OP_SEND:
        sent(l, cqe, current);
        break;
    case OP_CONNECT:
        if (current)
            l->sink->connected(l->arg, cqe->res < 0 ? -cqe->res : net_connect_error(l->fd));
        break;
    default: /* a cancel or a close: nothing to tell */
        break;
    }
}

/* Every completion there is; the buffers they brought are given back at
 * once, for the next round. Returns how many there were. */
static unsigned reap(struct uring *r)
{
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    uint64_t now = clock_us(); /* one reading for what one round brought */
    io_uring_for_each_cqe(&r->ring, head, cqe)
    {
        complete(r, cqe, now);
        n++;
    }
    io_uring_cq_advance(&r->ring, n);
    if (r->lent) {
        io_uring_buf_ring_advance(r->br, (int)r->lent);
        r->lent = 0;
    }
    return n;
}

/* Whether a round would find anything: entries to submit, completions to
 * reap, or work the kernel holds until asked (DEFER_TASKRUN's). */
static bool work(struct uring *r)
{
    unsigned flags = IO_URING_READ_ONCE(*r->ring.sq.kflags);
    return io_uring_sq_ready(&r->ring) || io_uring_cq_ready(&r->ring) ||
           (flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
}

static void turn(struct uring *r)
{
    io_uring_cq_eventfd_toggle(&r->ring, false);
    for (int i = 0; i < ROUNDS; i++) {
        gather(r);
        if (!work(r))
            break;
        int rc = io_uring_submit_and_get_events(&r->ring);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
            die("io_uring_enter: %s", strerror(-rc));
        reap(r);
    }
    io_uring_cq_eventfd_toggle(&r->ring, true);
    /* Work that came while the eventfd was quiet signalled nothing: the
     * kernel sets its flag before it looks at ours, so one of the two
     * sees the other. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    gather(r);
    if (work(r) && !ev_is_active(&r->again))
        ev_idle_start(r->loop, &r->again);
}

static void on_wake(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    struct uring *r = w->data;
    uint64_t count;
    /* Quiet the eventfd first: what the turn reaps signals nothing more. */
    io_uring_cq_eventfd_toggle(&r->ring, false);
    if (read(r->efd, &count, sizeof count) < 0 && errno != EAGAIN)
        die("io_uring eventfd: %s", strerror(errno));
    turn(r);
}

static void on_again(struct ev_loop *loop, ev_idle *w, int revents)
{
    (void)revents;
    struct uring *r = w->data;
    ev_idle_stop(loop, w);
    turn(r);
}

/* What the loop's other watchers queued (a send on the -R schedule's time,
 * a connect after a back-off) goes before the loop sleeps. */
static void on_before(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop, (void)revents;
    struct uring *r = w->data;
    if (r->queue || io_uring_sq_ready(&r->ring))
        turn(r);
}

/* ------------------------------------------------------------------------ */
/* The ring's life                                                            */
/* ------------------------------------------------------------------------ */

struct uring *uring_new(struct ev_loop *loop, size_t links)
{
    struct uring *r = xcalloc(1, sizeof *r);
    r->loop = loop;
    r->links = xcalloc(links ? links : 1, sizeof *r->links);
    r->nlinks = links;
    r->queue_tail = &r->queue;
    r->nbufs = pow2_at_least(links);
    r->nbufs = r->nbufs < BUFS_MIN ? BUFS_MIN : r->nbufs > BUFS_MAX ? BUFS_MAX : r->nbufs;
    r->buf_size = BUFS_BYTES / r->nbufs;
    r->buf_size = r->buf_size < BUF_MIN ? BUF_MIN : r->buf_size > BUF_MAX ? BUF_MAX : r->buf_size;
    /* Room for a turn's entries (a send and a receive per connection, or
     * a close and a connect) and, in the completion queue, for what they
     * bring back. */
    unsigned entries = pow2_at_least(links < 32 ? 64 : links * 2);
    entries = entries > 4096 ? 4096 : entries;
    int rc = ring_init(&r->ring, mode | IORING_SETUP_R_DISABLED, entries, entries * 4);
    if (rc < 0)
        die("io_uring_setup: %s", strerror(-rc));
    if ((rc = provide(&r->ring, &r->br, &r->bufs, r->nbufs, r->buf_size)) < 0)
        die("io_uring: a provided-buffer ring: %s", strerror(-rc));
    r->br_bytes = (size_t)r->nbufs * sizeof(struct io_uring_buf);
    r->bufs_bytes = (size_t)r->nbufs * r->buf_size;
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->efd < 0 || (rc = io_uring_register_eventfd(&r->ring, r->efd)) < 0)
        die("io_uring: an eventfd: %s", strerror(r->efd < 0 ? errno : -rc));
    ev_io_init(&r->wake, on_wake, r->efd, EV_READ);
    ev_prepare_init(&r->before, on_before);
    ev_idle_init(&r->again, on_again);
    r->wake.data = r->before.data = r->again.data = r;
    return r;
}

void uring_start(struct uring *r)
{
    /* Made disabled on another thread: enabling it here makes this thread
     * its one submitter. liburing 2.3 has no call for it. */
    if (syscall(__NR_io_uring_register, r->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0)
        die("io_uring: enabling the ring: %s", strerror(errno));
    ev_io_start(r->loop, &r->wake);
    ev_prepare_start(r->loop, &r->before);
}

void uring_finish(struct uring *r)
{
    ev_io_stop(r->loop, &r->wake);
    ev_prepare_stop(r->loop, &r->before);
    ev_idle_stop(r->loop, &r->again);
    gather(r);
    uint64_t deadline = clock_us() + FINISH_US;
    while (r->inflight && clock_us() < deadline) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts = {.tv_nsec = 10 * 1000 * 1000};
        io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, NULL);
        reap(r);
    }
}

void uring_free(struct uring *r)
{
    if (!r)
        return;
    /* The kernel cancels what is left when the ring goes, before the
     * buffers do. */
    io_uring_queue_exit(&r->ring);
    close(r->efd);
    munmap(r->br, r->br_bytes);
    munmap(r->bufs, r->bufs_bytes);
    free(r->links);
    free(r);
}

#else /* built without liburing */

bool uring_usable(char *why, size_t len)
{
    snprintf(why, len, "this volley was built without liburing");
    return false;
}

struct uring *uring_new(struct ev_loop *loop, size_t links)
{
    (void)loop, (void)links;
    die("io_uring: this volley was built without liburing");
}

void uring_start(struct uring *r) { (void)r; }
void uring_finish(struct uring *r) { (void)r; }
void uring_free(struct uring *r) { (void)r; }

void uring_link_init(struct uring_link *l, struct uring *r, size_t index,
                     const struct uring_sink *sink, void *arg)
{
    (void)l, (void)r, (void)index, (void)sink, (void)arg;
}

void uring_connect(struct uring_link *l, int fd) { (void)l, (void)fd; }

void uring_receive(struct uring_link *l) { (void)l; }
void uring_send(struct uring_link *l) { (void)l; }
void uring_close(struct uring_link *l) { (void)l; }

#endif
