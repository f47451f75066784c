/*
 * shm receive side: draining the inbound rings into the mailbox, single-copy reads, failures,
 * and the spin-then-futex wait every blocking shm call uses.
 *
 * There is no progress thread: whichever thread of this process waits (for a receive, for ring
 * space, for a single-copy acknowledgement) drains every inbound ring first. Messages whose
 * receive is posted land in the user's buffer (or are combined into it), the others in the
 * mailbox's unexpected list, so a sender never depends on the receiver posting a matching
 * receive, only on it being inside some zen call; two ranks blocked sending to each other drain
 * each other and cannot deadlock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "transport/shm_internal.h"

#define SLEEP_SLICE_NS ((int64_t)100 * 1000000)

static void futex_wait(_Atomic uint32_t *addr, uint32_t val, int64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000),
                           .tv_nsec = (long)(ns % 1000000000) };
    /* not FUTEX_PRIVATE: the word is in memory shared with other processes */
    (void)syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

void zen__shm_ring_bell(zen_shm_doorbell *bell)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&bell->sleepers, memory_order_relaxed) == 0)
        return;
    atomic_fetch_add(&bell->seq, 1);
    (void)syscall(SYS_futex, (uint32_t *)&bell->seq, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

void zen__shm_peer_down(shm_state *s, shm_peer *pe, zen_status st, int aborted, const char *why)
{
    pthread_mutex_lock(&s->drain_lock);
    if (!atomic_load(&pe->down)) {
        snprintf(pe->why, sizeof pe->why, "%s", why);
        pe->down_status = st;
        pe->down_abort = aborted;
        atomic_store(&pe->down, 1);
        atomic_store(&s->any_down, 1);
    }
    pthread_mutex_unlock(&s->drain_lock);
    zen__shm_ring_bell(&s->head->bell);
}

/* Corrupt ring contents (only a bug or a stray write can cause it): the peer is failed for good. */
static void ring_corrupt(shm_state *s, shm_peer *pe, const char *what, uint64_t a)
{
    char msg[300];
    snprintf(msg, sizeof msg, "protocol error in the shared-memory ring from rank %d: %s (%llu)",
             pe->rank, what, (unsigned long long)a);
    ZEN_WARN("transport", "%s", msg);
    if (pe->active) {
        zen__mailbox_deliver_fail(s->mb, &pe->d, ZEN_EPROTO, msg);
        pe->active = 0;
    }
    snprintf(pe->why, sizeof pe->why, "%s", msg);
    pe->down_status = ZEN_EPROTO;
    atomic_store(&pe->down, 1);
    atomic_store(&pe->failed, 1);
    zen__mailbox_fail_peer(s->mb, pe->rank, ZEN_EPROTO, msg);
}

/* Read n bytes at the peer's address raddr into dst (process_vm_readv, which may return short). */
static int cma_read(pid_t pid, void *dst, uint64_t raddr, size_t n)
{
    while (n > 0) {
        struct iovec l = { .iov_base = dst, .iov_len = n };
        struct iovec r = { .iov_base = (void *)(uintptr_t)raddr, .iov_len = n };
        ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            return got < 0 ? errno : EIO;
        }
        dst = (char *)dst + got;
        raddr += (uint64_t)got;
        n -= (size_t)got;
    }
    return 0;
}

/*
 * A request to send by single copy: read the message straight from the sender's buffer into
 * its destination, or, for a combining receive, in bounce-buffer-sized pieces that are combined
 * into the output while they are still in cache. The sender waits for the acknowledgement.
 */
static void take_rts(shm_state *s, shm_peer *pe, const zen_shm_rec *r)
{
    zen_delivery d;
    zen__mailbox_deliver_begin_pieces(s->mb, pe->rank, r->tag, (size_t)r->total, &d);
    int err = 0;
    if (d.dest) {
        err = cma_read(pe->pid, d.dest, r->addr, (size_t)r->total);
    } else if (d.pieces) {
        for (uint64_t off = 0; off < r->total && !err; off += ZEN_SHM_BOUNCE_BYTES) {
            size_t n = r->total - off < ZEN_SHM_BOUNCE_BYTES ? (size_t)(r->total - off)
                                                             : ZEN_SHM_BOUNCE_BYTES;
            err = cma_read(pe->pid, s->bounce, r->addr + off, n);
            if (!err)
                zen__mailbox_deliver_piece(&d, (size_t)off, s->bounce, n);
        }
    }
    if (err) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "reading a %llu-byte message from rank %d's memory failed: %s (rank %d died?)",
                 (unsigned long long)r->total, pe->rank, strerror(err), pe->rank);
        zen__mailbox_deliver_fail(s->mb, &d, ZEN_EPEER, msg);
        snprintf(pe->why, sizeof pe->why, "%s", msg);
        pe->down_status = ZEN_EPEER;
        atomic_store(&pe->down, 1);
        atomic_store(&s->any_down, 1);
    } else {
        zen__mailbox_deliver_end(s->mb, &d);
    }
}

/* Land one FIRST/MORE record's payload; returns 1 when it completed a message, 0 when more
 * pieces follow, -1 on a malformed sequence. */
static int take_piece(shm_state *s, shm_peer *pe, const zen_shm_rec *r)
{
    if (r->kind == ZEN_SHM_FIRST) {
        if (pe->active)
            return -1;
        if (r->bytes == r->total) { /* the whole message in one record: deliver it at once */
            zen__mailbox_deliver(s->mb, pe->rank, r->tag, (const char *)r + ZEN_SHM_REC_HDR,
                                 r->bytes);
            return 1;
        }
        zen__mailbox_deliver_begin_pieces(s->mb, pe->rank, r->tag, (size_t)r->total, &pe->d);
        pe->active = 1;
        pe->off = 0;
        pe->total = r->total;
    } else if (!pe->active || r->addr != pe->off) {
        return -1;
    }
    if (pe->off + r->bytes > pe->total)
        return -1;
    zen__mailbox_deliver_piece(&pe->d, (size_t)pe->off, (const char *)r + ZEN_SHM_REC_HDR,
                               r->bytes);
    pe->off += r->bytes;
    pe->last_ns = zen_now_ns();
    if (pe->off == pe->total) {
        pe->active = 0;
        zen__mailbox_deliver_end(s->mb, &pe->d);
        return 1;
    }
    return 0;
}

/*
 * Consume the records of pe's inbound ring up to the end of the first whole message (all of them
 * once the peer is down: what it sent before must be delivered before its receives fail). Not
 * further: the slot after a message was written by the producer with it, so reading it now
 * would wait for that cache line on the way to the caller, who is often waiting for just this
 * message; the next poll looks. Drain lock held.
 */
static int drain_ring(shm_state *s, shm_peer *pe)
{
    zen_shm_ring *in = pe->in_ctl;
    uint64_t head = atomic_load_explicit(&in->head, memory_order_relaxed);
    int n = 0, whole = 0;
    while (!atomic_load_explicit(&pe->failed, memory_order_relaxed) &&
           !(whole && !atomic_load_explicit(&pe->down, memory_order_relaxed))) {
        size_t pos = (size_t)(head % s->ring_bytes);
        zen_shm_rec *r = (zen_shm_rec *)(pe->in_data + pos);
        uint64_t stamp = atomic_load_explicit(&r->stamp, memory_order_acquire);
        if (stamp != head + 1) { /* 0: nothing yet; anything else cannot happen (shm_seg.h) */
            if (stamp != 0)
                ring_corrupt(s, pe, "record stamp out of sequence", stamp);
            break;
        }
        size_t len =
            (ZEN_SHM_REC_HDR + (size_t)r->bytes + ZEN_SHM_LINE - 1) / ZEN_SHM_LINE * ZEN_SHM_LINE;
        if (r->kind == ZEN_SHM_PAD) {
            len = s->ring_bytes - pos;
        } else if (pos + len > s->ring_bytes || r->bytes > s->frag_bytes) {
            ring_corrupt(s, pe, "record length", r->bytes);
            break;
        } else if (r->kind == ZEN_SHM_RTS) {
            if (pe->active) {
                ring_corrupt(s, pe, "single-copy request inside a message", r->total);
                break;
            }
            take_rts(s, pe, r);
            atomic_fetch_add(&in->acked, 1);
            whole = 1;
        } else if (r->kind != ZEN_SHM_FIRST && r->kind != ZEN_SHM_MORE) {
            ring_corrupt(s, pe, "record kind", r->kind);
            break;
        } else if ((whole = take_piece(s, pe, r)) < 0) {
            ring_corrupt(s, pe, "message pieces out of order (offset)", r->addr);
            break;
        }
        head += len;
        atomic_store(&in->head, head); /* seq_cst: ordered before the producer_waiting load */
        n++;
    }
    if (n && atomic_load(&in->producer_waiting))
        zen__shm_ring_bell(pe->bell);
    return n;
}

/* Peers marked down: what they sent before is drained by now; fail what remains. */
static void fail_down_peers(shm_state *s, const int *was_down)
{
    atomic_store(&s->any_down, 0);
    int64_t now = zen_now_ns();
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx < 0 || p == s->base.rank || atomic_load(&pe->failed))
            continue;
        if (pe->active && now - pe->last_ns > s->stall_ns && !atomic_load(&pe->down)) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "rank %d stopped sending in the middle of a message for %.1f s", pe->rank,
                     s->timeout_s);
            snprintf(pe->why, sizeof pe->why, "%s", msg);
            pe->down_status = ZEN_ETIMEDOUT;
            atomic_store(&pe->down, 1);
        }
        if (!atomic_load(&pe->down)) {
            if (pe->active)
                atomic_store(&s->any_down, 1); /* keep checking the stall */
            continue;
        }
        if (!was_down[p] && pe->down_status == ZEN_EPEER) {
            atomic_store(&s->any_down, 1); /* drain once more after seeing it down */
            continue;
        }
        if (pe->active) {
            zen__mailbox_deliver_fail(s->mb, &pe->d, pe->down_status, pe->why);
            pe->active = 0;
        }
        atomic_store(&pe->failed, 1);
        zen__mailbox_fail_peer(s->mb, pe->rank, pe->down_status, pe->why);
        if (pe->down_abort)
            zen__mailbox_fail_all(s->mb, ZEN_EPEER, pe->why);
    }
}

/* 1 when some inbound ring holds a record (its slot at head is stamped). No lock: a record
 * published after the check is found by the next poll, or rings the bell of a waiter that went to
 * sleep (shm_seg.h). */
static int rings_pending(shm_state *s)
{
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx < 0 || p == s->base.rank || !pe->in_ctl)
            continue;
        uint64_t head = atomic_load_explicit(&pe->in_ctl->head, memory_order_relaxed);
        zen_shm_rec *r = (zen_shm_rec *)(pe->in_data + head % s->ring_bytes);
        if (atomic_load_explicit(&r->stamp, memory_order_relaxed) != 0)
            return 1;
    }
    return 0;
}

int zen__shm_progress(shm_state *s)
{
    /* The common poll finds nothing: answer it without the lock (and without the cache line
     * traffic of a lock that every waiting thread of this process would bounce). */
    if (!atomic_load(&s->any_down) && !rings_pending(s))
        return 0;
    if (pthread_mutex_trylock(&s->drain_lock) != 0) {
        /* another thread drains: it rings this process's bell when it lets go, so a waiter that
         * sleeps now re-checks; one more try covers the holder that let go meanwhile */
        atomic_store(&s->drain_missed, 1);
        if (pthread_mutex_trylock(&s->drain_lock) != 0)
            return 0;
    }
    int check = atomic_load(&s->any_down);
    int *was_down = s->was_down;
    if (check)
        for (int p = 0; p < s->base.size; p++)
            was_down[p] = atomic_load(&s->peers[p].down);
    int n = 0;
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx >= 0 && p != s->base.rank && pe->in_ctl)
            n += drain_ring(s, pe);
    }
    if (check)
        fail_down_peers(s, was_down);
    pthread_mutex_unlock(&s->drain_lock);
    if (atomic_load(&s->drain_missed) && atomic_exchange(&s->drain_missed, 0))
        zen__shm_ring_bell(&s->head->bell);
    return n;
}

/* Polls between clock reads while spinning: a clock read costs more than a poll of an empty ring
 * on a VM, and deadlines are far coarser than 16 polls. */
#define POLLS_PER_CLOCK 16

int zen__shm_wait_until(shm_state *s, int (*done)(void *), void *arg, int64_t deadline_ns)
{
    zen_shm_doorbell *bell = &s->head->bell;
    int64_t now = zen_now_ns(), spin_end = now + s->spin_ns;
    for (unsigned polls = 1;; polls++) {
        int got = zen__shm_progress(s);
        if (done(arg))
            return 1;
        if (got && polls % POLLS_PER_CLOCK) /* maybe more behind it; the deadline still counts */
            continue;
        /* No PAUSE between polls: one takes 62-83 cycles on this EPYC, longer than a poll of an
         * empty ring, so it only delayed noticing a message (8-byte round trip 0.58-0.61 us with
         * one PAUSE per poll, 0.44-0.46 us without, same quiet minutes; docs/benchmarks.md). A
         * pinned waiter has its core to itself, and the spin is bounded by ZEN_SHM_SPIN_US. */
        if (polls % POLLS_PER_CLOCK && now < spin_end && !s->spin_yield)
            continue;
        now = zen_now_ns();
        if (now >= deadline_ns)
            return 0;
        if (now < spin_end) {
            if (s->spin_yield)
                sched_yield();
            continue;
        }
        atomic_fetch_add(&bell->sleepers, 1);
        atomic_thread_fence(memory_order_seq_cst);
        uint32_t seq = atomic_load(&bell->seq);
        zen__shm_progress(s);
        if (done(arg)) {
            atomic_fetch_sub(&bell->sleepers, 1);
            return 1;
        }
        int64_t nap = deadline_ns - now < SLEEP_SLICE_NS ? deadline_ns - now : SLEEP_SLICE_NS;
        futex_wait(&bell->seq, seq, nap);
        atomic_fetch_sub(&bell->sleepers, 1);
        now = zen_now_ns();
        spin_end = now + s->spin_ns;
    }
}
