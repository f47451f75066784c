/*
 * The receive-side matching engine shared by the inproc and tcp transports.
 *
 * A mailbox belongs to one rank. Receives are posted with zen__mailbox_irecv; arriving messages are
 * delivered by whoever carries them (a sending thread for inproc, a connection reader thread for
 * tcp) in two steps: deliver_begin claims a destination (the oldest posted receive with the same
 * source and tag, else a new buffer on the unexpected list), the carrier copies the bytes without
 * holding the lock, then deliver_end completes it. Claiming in order under the lock keeps the
 * per-(source, tag) FIFO order while copies from different senders run in parallel.
 */
#ifndef ZEN_TRANSPORT_MAILBOX_H
#define ZEN_TRANSPORT_MAILBOX_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

typedef struct zen_mailbox zen_mailbox;

/* What a carrier holds between deliver_begin and deliver_end. */
typedef struct zen_delivery {
    void *dest;    /* where to write the bytes; NULL: read and discard them */
    void *entry;   /* internal */
    int is_posted; /* internal */
    void *tmp;     /* internal: staging buffer of a combining receive */
    int pieces;    /* internal: a combining receive fed piece by piece (deliver_piece) */
} zen_delivery;

zen_status zen__mailbox_create(zen_transport *owner, int nranks, zen_mailbox **out);
void zen__mailbox_destroy(zen_mailbox *mb);

zen_status zen__mailbox_irecv(zen_mailbox *mb, int peer, uint64_t tag, void *buf, size_t cap,
                              zen_treq **out);
/* A receive that combines the message into buf instead of copying it (see transport.h). */
zen_status zen__mailbox_irecv_combine(zen_mailbox *mb, int peer, uint64_t tag, void *buf,
                                      size_t cap, const zen_combine *combine, zen_treq **out);
zen_status zen__mailbox_wait(zen_mailbox *mb, zen_treq *req, int64_t deadline_ns, size_t *len);
zen_status zen__mailbox_test(zen_mailbox *mb, zen_treq *req, int *done, size_t *len);
void zen__mailbox_req_free(zen_mailbox *mb, zen_treq *req);

/* A completed send request (inproc and tcp sends finish before isend returns). */
zen_status zen__mailbox_send_done(zen_treq **out);

void zen__mailbox_deliver_begin(zen_mailbox *mb, int src, uint64_t tag, size_t len,
                                zen_delivery *d);
void zen__mailbox_deliver_end(zen_mailbox *mb, zen_delivery *d);

/* The carrier could not finish (connection lost mid-message): complete the claimed receive, if
 * any, with status and msg instead. */
void zen__mailbox_deliver_fail(zen_mailbox *mb, zen_delivery *d, zen_status status,
                               const char *msg);

/*
 * Like deliver_begin, for a carrier that lands the bytes in pieces at increasing offsets with
 * zen__mailbox_deliver_piece (shm: ring fragments, chunks read from another process). A combining
 * receive then combines each piece in place instead of staging the whole message, so every piece
 * except the last must be a multiple of the element size (any multiple of 64 bytes is).
 */
void zen__mailbox_deliver_begin_pieces(zen_mailbox *mb, int src, uint64_t tag, size_t len,
                                       zen_delivery *d);

/* Land bytes [off, off + n) of a delivery begun with deliver_begin_pieces (discarded when the
 * message has no destination). No lock: the claimed receive belongs to the carrier. */
void zen__mailbox_deliver_piece(zen_delivery *d, size_t off, const void *data, size_t n);

/* 1 when the receive req has completed (a send always has). */
int zen__mailbox_req_done(zen_mailbox *mb, zen_treq *req);

/* The source rank and tag a receive was posted for. */
void zen__mailbox_req_info(zen_treq *req, int *peer, uint64_t *tag);

/* 1 while a carrier is writing into the receive req (zen__mailbox_req_free would wait for it). */
int zen__mailbox_req_receiving(zen_mailbox *mb, zen_treq *req);

/* Call fn(arg) after every change that may complete a receive (shm: a waiter that sleeps on a
 * futex instead of the mailbox's condition variable). Set before any traffic. */
void zen__mailbox_set_notify(zen_mailbox *mb, void (*fn)(void *), void *arg);

/* At a receive's timeout, fn(arg, &quiet_ns) names a peer that has been silent (heartbeats
 * missing) for quiet_ns, or returns -1; the timeout then names that peer (liveness.h). Set before
 * any traffic. */
void zen__mailbox_set_silent(zen_mailbox *mb, int (*fn)(void *, int64_t *), void *arg);

/* begin + memcpy + end. */
void zen__mailbox_deliver(zen_mailbox *mb, int src, uint64_t tag, const void *data, size_t len);

/* Complete every pending and future receive from peer with status and the message msg. */
void zen__mailbox_fail_peer(zen_mailbox *mb, int peer, zen_status status, const char *msg);

/* The status recorded by zen__mailbox_fail_peer for peer (ZEN_OK: none), its message in msg. */
zen_status zen__mailbox_peer_failure(zen_mailbox *mb, int peer, char *msg, size_t cap);

/* The same for every peer (abort). */
void zen__mailbox_fail_all(zen_mailbox *mb, zen_status status, const char *msg);

#endif
