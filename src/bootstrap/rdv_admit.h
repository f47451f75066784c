/*
 * Admission to a rendezvous listener (the master port and every data listener): the table of
 * connections still in their handshake, none of them proven yet, and who gives way when a new
 * one arrives and the table is full.
 *
 * A stranger can open connections faster than they time out. Refusing new connections at a
 * cap (the old rule) let it lock the real ranks out; instead the new connection is admitted and
 * the oldest unproven one is closed:
 *   1. a source address already holding ZEN_RDV_PER_SOURCE entries gives way from its own
 *      entries, so one host never pushes out another's; otherwise, with the table full
 *      (ZEN_RDV_MAX_PENDING), any entry may go;
 *   2. first the oldest entry that has not yet sent a complete first message (stage 0: a rank
 *      sends REGISTER/HELLO as soon as it connects, a silent stranger never does);
 *   3. else the oldest that got our challenge at least ZEN_RDV_GRACE_NS ago (a rank answers it
 *      within a round trip; a stranger without the secret cannot);
 *   4. else the new connection is closed. A rank whose connection closes before the challenge
 *      connects again (rendezvous.c), so none of these is fatal to a real rank.
 */
#ifndef ZEN_BOOTSTRAP_RDV_ADMIT_H
#define ZEN_BOOTSTRAP_RDV_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/rdv_msg.h"

#define ZEN_RDV_MAX_PENDING 256
#define ZEN_RDV_PER_SOURCE  64
#define ZEN_RDV_GRACE_NS    ((int64_t)1000000000)

/* One connection being vetted: stage 0 reads REGISTER/HELLO, then the CHALLENGE goes out;
 * stage 1 reads the PROOF. */
typedef struct zen_rdv_pending {
    int fd;
    int stage;
    size_t got;
    uint32_t src;  /* peer address, network order (0 when unknown) */
    int64_t since; /* accept (stage 0) or challenge (stage 1) time, monotonic ns */
    int64_t deadline;
    unsigned char first[ZEN_RDV_FIRST_BYTES];
    unsigned char challenge[ZEN_RDV_CHALLENGE_BYTES];
    unsigned char proof[ZEN_RDV_PROOF_BYTES];
    char host[32];
} zen_rdv_pending;

enum {
    ZEN_RDV_ADMIT_ROOM = -1,  /* append the new connection */
    ZEN_RDV_ADMIT_REFUSE = -2 /* close the new connection (rule 4) */
};

/* For a new connection from src at time now: ZEN_RDV_ADMIT_ROOM, ZEN_RDV_ADMIT_REFUSE, or the
 * index in pd[0..npd) of the entry to close first. */
int zen__rdv_admit(const zen_rdv_pending *pd, int npd, uint32_t src, int64_t now);

/*
 * A log line per event at most once per interval: a stranger can cause thousands of drops a
 * second, and a line each buried rank 0's log. zen__rdv_warn_due counts the event and says
 * whether to log it now; *quiet is then how many events since the last logged one were not.
 */
typedef struct zen_rdv_warn_limit {
    int64_t interval_ns;
    int64_t next;
    long total;    /* events */
    long unlogged; /* events not logged, in all */
    long quiet;    /* events not logged since the last logged one */
} zen_rdv_warn_limit;

int zen__rdv_warn_due(zen_rdv_warn_limit *w, int64_t now, long *quiet);

#endif
