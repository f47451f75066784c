/* shm transport internals shared by shm.c (the vtable), shm_progress.c (receiving) and
 * shm_boot.c (setup). */
#ifndef ZEN_TRANSPORT_SHM_INTERNAL_H
#define ZEN_TRANSPORT_SHM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "transport/liveness.h"
#include "transport/mailbox.h"
#include "transport/shm.h"
#include "transport/shm_seg.h"

typedef struct shm_state shm_state;

typedef struct shm_peer {
    int rank;
    int lidx;  /* index on this host, -1: another host (tcp) */
    pid_t pid; /* local peers */
    int sock;  /* local peers: the liveness connection, -1 when closed */
    void *seg; /* local peers: their segment, mapped */
    size_t seg_bytes;
    zen_shm_ring *out_ctl; /* ring this -> peer (in the peer's segment) */
    char *out_data;
    zen_shm_doorbell *bell; /* the peer's doorbell */
    zen_shm_ring *in_ctl;   /* ring peer -> this (in this segment) */
    char *in_data;
    pthread_mutex_t send_lock;
    uint64_t rts_sent;  /* RTS records sent to the peer (under send_lock) */
    uint64_t head_seen; /* the out ring's head when last read (under send_lock; shm_seg.h) */
    /* consumer state of the inbound ring (under the drain lock) */
    int active; /* a message is arriving in pieces */
    zen_delivery d;
    uint64_t off, total;
    int64_t last_ns; /* last piece of the active message */
    /* failure: the monitor sets down (with why), the drainer turns it into failed receives */
    atomic_int down;
    atomic_int failed;
    zen_status down_status;
    int down_abort; /* the peer aborted: everything fails, as with tcp's ABORT frame */
    char why[512];
    /* heartbeat watch (monitor thread only) */
    uint64_t hb_seen;            /* the peer's heartbeat word when it last moved */
    _Atomic int64_t hb_quiet_ns; /* how long it has not moved, as observed (shm_heartbeat.c);
                                    also read by a timed-out wait */
    int hb_moved;                /* it moved at least once since setup */
} shm_peer;

struct shm_state {
    zen_transport base; /* first: a zen_transport * is a shm_state * */
    zen_mailbox *mb;
    zen_transport *tcp; /* other hosts (mixed), or NULL */
    shm_peer *peers;    /* one per world rank */
    int nlocal;
    void *seg; /* this process's segment */
    size_t seg_bytes;
    zen_shm_seg_head *head;
    size_t ring_bytes;
    size_t frag_bytes; /* largest record payload */
    size_t cma_min;    /* RTS from this size on (when the receiver allows it) */
    double timeout_s;
    int64_t stall_ns;
    int64_t report_ns; /* ZEN_WAIT_REPORT_S (wait_report.h), 0: never */
    int64_t spin_ns;
    int spin_yield;
    pthread_mutex_t drain_lock;
    atomic_int aborted;
    atomic_int any_down;     /* some peer has down set and not yet failed */
    atomic_int drain_missed; /* a thread found the drain lock taken (see zen__shm_progress) */
    pthread_t monitor;
    int monitor_started;
    int stop_fd;        /* eventfd: tells the monitor to leave */
    char *bounce;       /* combining single-copy reads land here first (drain lock) */
    int slot_bells_due; /* a slot was posted, its peers' doorbells not yet rung (shm_slots.c) */
    int *was_down;      /* progress scratch: peers down when it started (drain lock) */
    int *host_of;       /* world rank -> host index */
    int nhosts;
    zen_liveness live;  /* agreed at setup with every rank (liveness.h) */
    uint64_t live_wire; /* this rank's own settings, in its segment head */
    int64_t silence_ns; /* the watch window; INT64_MAX: this rank does not watch */
    int64_t beat_ns;    /* heartbeat period */
    int64_t suspect_ns; /* silence that a timeout takes as proof */
    int64_t last_tick_ns;
    char abort_why[400];      /* this rank's abort reason (shm_abort) */
    atomic_int abort_why_set; /* abort_why is complete */
};

#define ZEN_SHM_BOUNCE_BYTES ((size_t)256 << 10)

/* Whether this process offers its peers single copy (shm_cma.c: ZEN_SHM_CMA, and where it is
 * -1 whether process_vm_readv is at least half as fast as memcpy here). */
int zen__shm_cma_allowed(void);

/* Create this segment, probe single copy, exchange segments with every local peer. */
zen_status zen__shm_setup_segments(shm_state *s, zen_shm_boot *b, const zen_shm_blob *blobs,
                                   int64_t deadline);

/* Ring bell: wake its sleepers, if any (see shm_seg.h). */
void zen__shm_ring_bell(zen_shm_doorbell *bell);

/* Drain every inbound ring and turn dead peers into failures. Never blocks (another thread
 * draining: returns 0). Returns the number of records consumed. */
int zen__shm_progress(shm_state *s);

/*
 * Wait until done(arg) != 0 or the deadline: poll progress for spin_ns, then sleep on this
 * process's doorbell (woken by any arrival, ring space, ack, mailbox completion or failure).
 * Returns 1 when done, 0 at the deadline.
 */
int zen__shm_wait_until(shm_state *s, int (*done)(void *), void *arg, int64_t deadline_ns);

/* Heartbeats (shm_heartbeat.c). setup: agree the liveness settings with the local peers (their
 * segment heads; s->tcp, created with them, folds in the other hosts') and set silence_ns,
 * beat_ns and suspect_ns. The monitor polls with zen__shm_heartbeat_poll_ms as its timeout and
 * calls zen__shm_heartbeat_tick after every wake-up: it bumps this process's word and aborts the
 * transport naming a local peer whose word has not moved for silence_ns. */
void zen__shm_liveness_local(shm_state *s);
void zen__shm_heartbeat_setup(shm_state *s);
/* The peer silent for longest (at least suspect_ns; tcp's peers too in a mixed job), or -1. */
int zen__shm_silent_peer(shm_state *s, int64_t *quiet_ns);
int zen__shm_heartbeat_poll_ms(const shm_state *s);
void zen__shm_heartbeat_tick(shm_state *s);

/* Tests only (test_shm_boot.c), NULL otherwise: called with stage 0 (rank -1) by
 * zen__shm_boot_begin right after the setup socket listens, so that a test can connect to it
 * before any peer knows its name, and with stage 1 when this rank's hand-over starts. */
extern void (*zen__shm_boot_test_hook)(int stage, int rank, const char *sock_name);

/* Collective slots (shm_slots.c; the vtable entries, see transport.h). */
size_t zen__shm_slot_cap(zen_transport *t);
void *zen__shm_slot_data(zen_transport *t, int r, uint64_t seq);
void zen__shm_slot_post(zen_transport *t, uint64_t seq, const zen_slot_desc *d);
zen_status zen__shm_slot_wait(zen_transport *t, int r, uint64_t seq, int64_t deadline_ns,
                              zen_slot_desc *d);
void zen__shm_slot_wake(zen_transport *t);

/* Mark peer as gone (monitor thread, or a failed read from its memory). */
void zen__shm_peer_down(shm_state *s, shm_peer *pe, zen_status st, int aborted, const char *why);

#endif
