/*
 * The transport vtable. A transport moves tagged byte messages between the world ranks of one
 * job; communicators (src/comm.c) sit on top and map their ranks to world ranks.
 *
 * Semantics every transport provides:
 *  - Matching is by (source world rank, 64-bit tag); messages with the same source and tag match
 *    receives in the order they were sent.
 *  - Progress is independent of the receiver: a send completes without a matching receive being
 *    posted (inproc and tcp buffer unexpected messages at the receiver; mpi relies on MPI's own
 *    progress). So a collective may post its sends and receives in any order without deadlock.
 *  - Every wait has a deadline. A message longer than the posted capacity completes that receive
 *    with ZEN_EPROTO. A dead peer completes every receive from it with ZEN_EPEER; an abort (local,
 *    or a peer's abort notice) completes every pending request with an error.
 *  - Error details are written to t->err (under t->err_lock) naming this rank and the peer.
 *
 * Tags: the high 32 bits are a communicator context id, the low 32 bits the user tag (bit 31 set
 * for internal collective traffic, which then carries the collective's sequence number).
 */
#ifndef ZEN_TRANSPORT_TRANSPORT_H
#define ZEN_TRANSPORT_TRANSPORT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

typedef struct zen_transport zen_transport;

/* A transport request. Each transport embeds this as the first member of its own request. */
typedef struct zen_treq {
    int is_send;
} zen_treq;

/*
 * A combining receive: instead of copying the message into buf, the transport stores
 * fn(buf, other, message, bytes, ctx), which must write bytes bytes to buf computed element-wise
 * from other (bytes bytes; may equal buf) and the message. The collectives use it to fuse the
 * reduction of a ring step into the delivery (inproc: the sending thread reduces straight from
 * its buffer into the receiver's output, one pass instead of a copy and a reduce).
 */
typedef void (*zen_combine_fn)(void *buf, const void *other, const void *message, size_t bytes,
                               void *ctx);

typedef struct zen_combine {
    zen_combine_fn fn;
    const void *other;
    void *ctx;
} zen_combine;

/* What a collective slot carries besides its payload (src/coll/slots.c gives the words their
 * meaning; the transport only moves them). */
typedef struct zen_slot_desc {
    uint64_t w[3];
} zen_slot_desc;

typedef struct zen_transport_ops {
    const char *name;
    /* Start sending len bytes to world rank peer. buf must stay valid until the request
     * completes (inproc and tcp complete it before returning). */
    zen_status (*isend)(zen_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                        zen_treq **req);
    /* Post a receive of at most cap bytes from world rank peer. */
    zen_status (*irecv)(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                        zen_treq **req);
    /* Wait until req completes or the monotonic deadline passes (ZEN_ETIMEDOUT, req stays
     * valid). On completion returns the request's status and *len gets the bytes moved. */
    zen_status (*wait)(zen_transport *t, zen_treq *req, int64_t deadline_ns, size_t *len);
    /* Non-blocking completion check: *done = 1 and the status, or *done = 0 and ZEN_OK. */
    zen_status (*test)(zen_transport *t, zen_treq *req, int *done, size_t *len);
    /* Release a request; a pending receive is cancelled, a pending send is finished first. */
    void (*req_free)(zen_transport *t, zen_treq *req);
    /* Fail all pending and future requests and notify peers (best effort, never blocks).
     * reason is copied; it is what peers report. */
    void (*abort)(zen_transport *t, zen_status status, const char *reason);
    /* Close connections and free everything. Called once, after every request is freed. */
    void (*destroy)(zen_transport *t);
    /* Optional (tests): write raw bytes on the connection to peer, bypassing framing. */
    zen_status (*send_raw)(zen_transport *t, int peer, const void *bytes, size_t len);
    /* Optional (NULL: none): the transport's own dense allreduce among the n world ranks
     * world_ranks[0..n) (this rank is one of them, listed in communicator order), for
     * ZEN_ALLREDUCE_MPI. sendbuf == recvbuf means in place. op is never ZEN_AVG (the caller
     * reduces with ZEN_SUM and divides). Automatic choice only sends f32, f64, i32 and i64 here;
     * bf16 may be refused with ZEN_EUNSUPPORTED. Errors are recorded in t->err like any other call.
     */
    zen_status (*native_allreduce)(zen_transport *t, const int *world_ranks, int n,
                                   const void *sendbuf, void *recvbuf, size_t count,
                                   zen_dtype dtype, zen_op op);
    /* Optional (NULL: the caller receives and combines itself): irecv with a combine. */
    zen_status (*irecv_combine)(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                                const zen_combine *combine, zen_treq **req);
    /*
     * Optional (NULL: none): collective slots, a shared flag-and-slot area (shm_slots.c). Each
     * world rank owns two slots, selected by the parity of a slot sequence number seq (>= 1), that
     * it alone writes and every rank reads in place; no queueing, no copy by the transport.
     * slot_cap: payload bytes of a slot, 0 when this transport has no slots (mixed shm, one
     * rank). slot_data: the payload of world rank r's slot for seq (this rank's: to fill before
     * slot_post; a peer's: to read after slot_wait returned ZEN_OK, until this rank posts
     * seq + 1). slot_post: publish this rank's slot for seq with descriptor d (release order).
     * slot_wait: until world rank r has published seq (then *d gets its descriptor), a peer
     * fails (ZEN_EPEER naming it, with an abort's reason), this transport aborts, or the
     * deadline (ZEN_ETIMEDOUT naming r, or a silent rank). slot_wake: wake the peers that sleep
     * waiting for a slot this rank posted; the caller calls it once it has read what it needs,
     * before it returns (slot_wait also does before it sleeps itself), so that the fence that
     * waking needs does not delay the reads. The caller guarantees the reuse rule: no rank
     * posts seq + 2 before every reader is done with seq.
     */
    size_t (*slot_cap)(zen_transport *t);
    void *(*slot_data)(zen_transport *t, int r, uint64_t seq);
    void (*slot_post)(zen_transport *t, uint64_t seq, const zen_slot_desc *d);
    zen_status (*slot_wait)(zen_transport *t, int r, uint64_t seq, int64_t deadline_ns,
                            zen_slot_desc *d);
    void (*slot_wake)(zen_transport *t);
} zen_transport_ops;

struct zen_transport {
    const zen_transport_ops *ops;
    void *impl; /* the transport's own state */
    int rank;   /* world rank of this endpoint */
    int size;   /* world size */
    int local_rank;
    int local_size;
    /* world rank -> host index 0..nhosts-1, when the transport knows the hosts (shm, mixed:
     * from the host identities exchanged at rendezvous); NULL otherwise. Owned by the transport.
     * Read it through zen__transport_host. */
    const int *host_of;
    int nhosts;
    pthread_mutex_t err_lock;
    char err[512]; /* detail of the last failure, "rank R: ... rank P ..." */
};

/* Record a formatted detail in t->err (prefixed "rank R: ") and return status. Thread safe. */
zen_status zen__transport_fail(zen_transport *t, zen_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Host index of world rank r (ranks with equal indices share a host), or -1 when the transport
 * does not know the hosts. Thread safe (fixed at creation). */
int zen__transport_host(const zen_transport *t, int r);

/* Copy t->err into out (size bytes). */
void zen__transport_last_error(zen_transport *t, char *out, size_t size);

/* Initialise and release the fields of the base struct. */
void zen__transport_base_init(zen_transport *t, const zen_transport_ops *ops, void *impl, int rank,
                              int size);
void zen__transport_base_release(zen_transport *t);

/* Constructors (each in its own file). */
typedef struct zen_inproc_world zen_inproc_world;
zen_status zen__transport_inproc_create(zen_inproc_world *world, int rank, zen_transport **out);
/* The world of n inproc ranks behind the public zen_inproc_world_create/destroy (which are
 * defined in coll/run_inproc.c, so no transport implements the public communicator API). */
zen_status zen__transport_inproc_world_create(int nranks, zen_inproc_world **out);
void zen__transport_inproc_world_destroy(zen_inproc_world *world);

/* tcp over a full mesh of connected sockets (fds[p] for peer p, -1 at fds[rank]; made by
 * zen__rendezvous in src/bootstrap). Takes ownership of the sockets, also on failure. */
zen_status zen__transport_tcp_create(int rank, int size, int *fds, double timeout_s,
                                     zen_transport **out);

/* mpi: ZEN_EUNSUPPORTED when built without MPI. */
zen_status zen__transport_mpi_create(zen_transport **out);
int zen__transport_mpi_launched(void); /* 1 when started by mpirun and built with MPI */

#endif
