/*
 * The communicator object and the helpers every collective algorithm uses to talk to peers.
 *
 * A collective brackets its work with zen__coll_begin/zen__coll_end. begin checks the arguments'
 * common preconditions, stamps the arrival time, takes the next sequence number (which becomes
 * the tag of all its messages, so consecutive collectives never mix) and fixes one deadline for
 * the whole call. end records the leave time and the per-call byte counters, and on a fatal error
 * poisons the communicator and aborts the transport so that peers blocked on this rank fail fast
 * with a message naming it instead of waiting for their own timeouts.
 */
#ifndef ZEN_COLL_COMM_INTERNAL_H
#define ZEN_COLL_COMM_INTERNAL_H

#include <stdint.h>

#include <zen/comm.h>

#include "transport/registry.h"
#include "transport/transport.h"

/*
 * Attribute slots (MPI's attribute caching in miniature): a layer above coll keeps per-communicator
 * state under its key instead of a field of its own in struct zen_comm. zen_comm_destroy releases
 * the slots, last key first, before the transport, so a slot may hold sub-communicators.
 */
typedef enum zen_comm_attr_key {
    ZEN_ATTR_SPARSE_HIER = 0, /* sparse/scheme/hier_host.c: the per-host sub-communicators */
    ZEN_ATTR_HOSTS = 1,       /* coll/topology.c: the cached host grouping (zen__comm_hosts) */
    ZEN_ATTR_COUNT = 4
} zen_comm_attr_key;

typedef struct zen_comm_attr {
    void *value;
    void (*release)(void *value);
} zen_comm_attr;

struct zen_comm {
    zen_transport *transport;
    int owns_transport;      /* root communicator: destroys the transport */
    zen_inproc_world *world; /* inproc world (not owned) */
    zen_transport_kind kind;
    int rank;
    int size;
    int *world_ranks;   /* communicator rank -> transport (world) rank */
    uint32_t ctx;       /* context id: high 32 bits of every tag */
    uint64_t coll_seq;  /* collectives started; the same on every rank */
    uint32_t split_seq; /* splits done, to derive child context ids */
    int depth;          /* nesting of collectives (sparse calls dense ones) */
    double timeout_s;
    uint64_t seeds[4];   /* agreed at creation; sparse hashing uses them */
    zen_status poisoned; /* ZEN_OK, or the fatal error that poisoned the communicator */
    char last_error[640];
    zen_comm_stats stats;
    zen_arrival arrivals[ZEN_ARRIVAL_HISTORY];
    uint64_t arrival_count;
    void *coll_scratch; /* dense collectives: cached scratch (coll_args.c), freed on destroy */
    size_t coll_scratch_bytes;
    zen_comm_attr attrs[ZEN_ATTR_COUNT]; /* see zen_comm_attr_key */
    void *spare_request; /* p2p.c: one destroyed zen_request kept for the next, freed on destroy */
    int check_args;      /* ZEN_COLL_AGREE: dense collectives agree on their arguments (agree.c) */
    long slot_max_param; /* ZEN_SHM_SLOT_MAX_BYTES, read at creation (slots.c) */
    zen_allreduce_algo algo_forced; /* ZEN_ALLREDUCE_ALGO (AUTO: auto), parsed at creation: a
                                       tunables lookup costs about 170 ns, a quarter of an
                                       8-byte allreduce */
    uint64_t slot_seq; /* collective slot uses so far (slots.c); the same on every rank */
};

/*
 * A collective's descriptor as it travels (agree.c, which packs and reads it): 16 bytes, so that
 * with an 8-byte payload a message still fits one cache line of an shm record. word holds a
 * magic, the kind, op, dtype, allreduce algorithm, how count reads and root + 1 (24 bits); count
 * the element count or a hash of the per-rank counts. word 0 means "not checked" (nested calls,
 * one rank).
 */
typedef struct zen_agree {
    uint64_t word;
    uint64_t count;
} zen_agree;

/* State of one collective call. */
typedef struct zen_coll {
    const char *op;
    uint64_t tag;
    int64_t deadline_ns;
    size_t arrival_slot;
    int outermost;
    zen_agree agree; /* this rank's descriptor (agree.c) */
    int slots;       /* the call runs on the shm latency path (slots.c), agreement included */
    int stamped;     /* deadline and arrival stamp taken (zen__coll_stamp) */
} zen_coll;

/* Record a detailed error ("rank R: <detail>") as the communicator's last error; returns status. */
zen_status zen__fail(zen_comm *comm, zen_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ZEN_ALLREDUCE_ALGO's value as an algorithm ("auto": ZEN_ALLREDUCE_AUTO; allreduce.c), parsed
 * once per communicator. */
zen_allreduce_algo zen__allreduce_algo_parse(const char *name);

/* Start a collective named op; fails on a poisoned communicator. */
zen_status zen__coll_begin(zen_comm *comm, const char *op, zen_coll *cc);

/* The same without its clock reads (the deadline, the arrival stamp): the caller calls
 * zen__coll_stamp as soon as its peers can see its contribution, before it waits on anything.
 * For the shm latency path (slots.c): two clock reads cost 50-500 ns on a VM's paravirtual
 * clock, and before the post they delay every peer; after it they overlap the peers' work.
 * zen__coll_stamp is idempotent; zen__coll_end stamps a call that failed before it did. */
zen_status zen__coll_begin_late(zen_comm *comm, const char *op, zen_coll *cc);
void zen__coll_stamp(zen_comm *comm, zen_coll *cc);

/* Finish it with the status of its work; returns that status (after bookkeeping). */
zen_status zen__coll_end(zen_comm *comm, zen_coll *cc, zen_status status);

/* Post a send or receive of bytes to/from communicator rank peer, tagged with the collective. */
zen_status zen__coll_isend(zen_comm *comm, const zen_coll *cc, int peer, const void *buf,
                           size_t bytes, zen_treq **req);
zen_status zen__coll_irecv(zen_comm *comm, const zen_coll *cc, int peer, void *buf, size_t bytes,
                           zen_treq **req);

/*
 * Wait for req (from zen__coll_isend/irecv) and free it. For a receive, the message must be
 * exactly expect bytes (SIZE_MAX: any length up to the posted size; *got gets it, may be NULL):
 * a different length means the ranks disagree on counts, reported as ZEN_EPROTO naming the peer.
 * req NULL is a no-op. On error the request is freed too.
 */
zen_status zen__coll_wait(zen_comm *comm, const zen_coll *cc, zen_treq *req, int peer,
                          size_t expect, size_t *got);

/* Send sbytes to dst and receive exactly rbytes from src, concurrently. Either size may be 0
 * with a NULL buffer, but the message is still exchanged (so counts are checked). dst or src
 * < 0 skips that half. */
zen_status zen__coll_sendrecv(zen_comm *comm, const zen_coll *cc, int dst, const void *sbuf,
                              size_t sbytes, int src, void *rbuf, size_t rbytes);

/*
 * A receive that the transport combines into buf (see zen_combine in transport.h) instead of
 * copying. ZEN_EUNSUPPORTED (nothing posted, no error recorded) when the transport cannot; the
 * caller then receives and reduces itself.
 */
zen_status zen__coll_irecv_combine(zen_comm *comm, const zen_coll *cc, int peer, void *buf,
                                   size_t bytes, const zen_combine *combine, zen_treq **req);

/* The root's side of a linear rooted collective: scatter sends block j of send_blocks to each
 * other rank j, gather receives it into recv_blocks (pass the other NULL); block j starts at
 * j * bytes. All are posted at once so the copies run concurrently, then waited for in rank
 * order. The root's own block is the caller's. */
zen_status zen__coll_root_fan(zen_comm *comm, const zen_coll *cc, const void *send_blocks,
                              void *recv_blocks, size_t bytes);

/* Free a request without waiting (error paths). */
void zen__coll_req_drop(zen_comm *comm, zen_treq *req);

/* Tag of user point-to-point messages. */
uint64_t zen__comm_user_tag(const zen_comm *comm, int tag);

/* The seeds agreed at creation (internal users: sparse hashing). */
const uint64_t *zen__comm_seeds(const zen_comm *comm);

/* The value under key (NULL when unset). Local; not thread safe (like the communicator). */
void *zen__comm_attr_get(const zen_comm *comm, zen_comm_attr_key key);

/* Store value under key, releasing the previous value first (release may be NULL). Local. */
void zen__comm_attr_set(zen_comm *comm, zen_comm_attr_key key, void *value,
                        void (*release)(void *value));

/* The grouping of a communicator's ranks into hosts (topology.c). Every rank holds the same. */
typedef struct zen_comm_hosts {
    int hosts;          /* number of hosts (>= 1) */
    int host;           /* this rank's host; hosts are numbered by their lowest rank */
    int local;          /* this rank's index in its host (rank order) */
    int min_local;      /* ranks on the smallest host */
    int max_local;      /* ranks on the largest host */
    uint64_t sig;       /* hash of the rank -> host map (equal maps, equal signatures) */
    const int *host_of; /* [size] rank -> host; owned by the communicator, valid until the next
                           zen__comm_hosts call on it or its destruction */
} zen_comm_hosts;

/*
 * The host grouping of comm: ranks_per_host > 0 asks for emulated hosts of that many consecutive
 * ranks (local); 0 for the real grouping, computed at the first call and cached on comm -- from
 * the transport's host table when it has one, one host for inproc or when the launcher put the
 * whole world on this host, else one allgather of the launcher's LOCAL_RANK/LOCAL_SIZE and the
 * host name. That first call is then collective over comm. Not thread safe (like comm).
 */
zen_status zen__comm_hosts(zen_comm *comm, int ranks_per_host, zen_comm_hosts *out);

#endif
