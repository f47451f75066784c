/*
 * comm.h - communicators, point-to-point messages and dense collectives.
 *
 * A communicator is a group of N ranks that created it together. Ranks talk through one
 * transport: "inproc" (ranks are threads of one process), "tcp" (one process per rank, full
 * mesh), "shm" (one process per rank, shared memory on one host), "shm+tcp" (shared memory
 * inside each host, tcp between hosts) or "mpi" (Open MPI underneath, when built with it).
 *
 * Ordering contract: every rank of a communicator issues the same collectives in the same order.
 * Thread safety: one thread uses a communicator at a time (different communicators may be used
 * by different threads concurrently); zen_comm_abort may be called from any thread at any time.
 * A request (zen_request) belongs to its communicator: use it from the communicator's thread and
 * free it before the communicator is destroyed. Pure queries of a communicator (zen_comm_rank and
 * the other getters below) may run concurrently with each other, not with a call that changes it.
 * Failure model: every blocking wait has a deadline (opts.timeout_s); on a timeout or a dead peer
 * the call returns an error and zen_comm_last_error names the rank and the peer.
 * Ownership: the library never keeps a caller's buffer beyond the call that received it, except
 * the buffer of a nonblocking request (until the request completes or is freed).
 */
#ifndef ZEN_COMM_H
#define ZEN_COMM_H

#include <zen/zen.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zen_comm zen_comm;
typedef struct zen_request zen_request;
typedef struct zen_inproc_world zen_inproc_world;

/*
 * Options for zen_comm_create. Initialise with zen_comm_options_init(&o) (or ZEN_COMM_OPTIONS_INIT)
 * so fields added later get their defaults.
 *  size: sizeof(zen_comm_options) as the caller compiled it, set by the initialisers; the library
 *      rejects (ZEN_EINVAL) a size it does not know, so a struct from a newer header fails loudly
 *      instead of being misread. 0 (a zeroed struct) is taken as this version's size.
 *  rank, world_size: -1 means "from the environment" (ZEN_RANK/ZEN_WORLD_SIZE, RANK/WORLD_SIZE,
 *      OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE), required for inproc.
 *  master_addr, master_port: rendezvous of the tcp transport; NULL/0 means from the environment
 *      (ZEN_MASTER_ADDR/ZEN_MASTER_PORT, MASTER_ADDR/MASTER_PORT).
 *  inproc_world: the shared world for the inproc transport (zen_inproc_world_create).
 *  timeout_s: deadline of every blocking wait; <= 0 means the default 300 s (ZEN_TIMEOUT_S).
 */
typedef struct zen_comm_options {
    size_t size;
    zen_transport_kind transport;
    int rank;
    int world_size;
    const char *master_addr;
    int master_port;
    zen_inproc_world *inproc_world;
    double timeout_s;
} zen_comm_options;

#define ZEN_COMM_OPTIONS_INIT                                                          \
    {                                                                                  \
        .size = sizeof(zen_comm_options), .transport = ZEN_TRANSPORT_AUTO, .rank = -1, \
        .world_size = -1, .master_addr = NULL, .master_port = 0, .inproc_world = NULL, \
        .timeout_s = 0.0                                                               \
    }

/* Fill *opts with the defaults (the same as ZEN_COMM_OPTIONS_INIT). NULL is ignored. */
ZEN_API void zen_comm_options_init(zen_comm_options *opts);

/*
 * The rank a launcher gave this process (zen launch, torchrun, mpirun, a PMI launcher, srun): the
 * one zen_comm_create takes for rank -1, from the first of ZEN_RANK, RANK, OMPI_COMM_WORLD_RANK,
 * PMI_RANK, PMIX_RANK and (in a Slurm step) SLURM_PROCID that is set and not empty. *rank = -1 when none is: the process was not started as a
 * rank, so a program whose ranks may also be threads (zen train, zen bench) runs them itself.
 * ZEN_EINVAL (*rank = -1) when a launcher variable is malformed, as zen_comm_create would say.
 * Reads the environment only: thread safe as long as nobody changes it meanwhile.
 */
ZEN_API zen_status zen_comm_env_rank(int *rank);

/* What zen_comm_create reads from the launcher's environment (zen_comm_env_launch). */
typedef struct zen_launch_env {
    size_t size;           /* sizeof(zen_launch_env), set by the caller (0 is taken as this) */
    int rank;              /* -1 when no launcher gave one */
    int world_size;        /* -1 when not given */
    int local_rank;        /* rank among the processes of this host, -1 when not given */
    int local_size;        /* processes on this host, -1 when not given */
    char master_addr[256]; /* host of rank 0's rendezvous */
    int master_port;       /* its port */
    int slurm_step;        /* 1: a task of a Slurm step (started by srun) */
    char rank_var[32];     /* the variable the rank came from ("SLURM_PROCID", "RANK", ...), "" */
} zen_launch_env;

/*
 * Fill *out with the rendezvous facts of this process's launcher, as zen_comm_create takes them:
 * each from the first of zen's (ZEN_*), torchrun's, Open MPI's, PMI's, PMIx's and, in a Slurm
 * step, Slurm's variables that is set (docs/multi-host.md, "Slurm"). In a Slurm step without
 * MASTER_ADDR/MASTER_PORT, the master is the first host of SLURM_STEP_NODELIST and the port
 * 20000 + 10 * (SLURM_JOB_ID % 1000) + SLURM_STEP_ID % 10; outside one, 127.0.0.1:29500.
 * ZEN_EINVAL when a variable is malformed (logged, naming it); ZEN_EINVAL when out is NULL or its
 * size is not this zen's. Reads the environment only: thread safe as long as nobody changes it.
 */
ZEN_API zen_status zen_comm_env_launch(zen_launch_env *out);

/*
 * Create a communicator. Collective: every rank of the world calls it. On success *out owns the
 * communicator; release it with zen_comm_destroy. Agrees on hash seeds (broadcast from rank 0)
 * used by the sparse module. On failure *out is NULL and the status says why (the reason is
 * also logged).
 */
ZEN_API zen_status zen_comm_create(const zen_comm_options *opts, zen_comm **out);

/*
 * Split (MPI_Comm_split): ranks with the same color form a new communicator, ordered by key and
 * then by parent rank. color < 0 (ZEN_SPLIT_NONE) joins nothing and gets *out = NULL. Collective
 * over the parent. On success the caller owns *out (zen_comm_destroy); on failure *out is NULL.
 * The child shares the parent's transport, so parent and child are used by the same one thread
 * at a time; destroy children before the parent.
 */
#define ZEN_SPLIT_NONE (-1)
ZEN_API zen_status zen_comm_split(zen_comm *comm, int color, int key, zen_comm **out);

/* Collective flush: returns once every rank has reached it (a barrier with a timeout). The
 * communicator stays valid and must still be destroyed. ZEN_EINVAL for NULL. */
ZEN_API zen_status zen_comm_finalize(zen_comm *comm);

/* Local release of a communicator and, for a root communicator, its transport. NULL is ok.
 * Free the communicator's requests and destroy its split children first. Not collective. */
ZEN_API void zen_comm_destroy(zen_comm *comm);

/*
 * Abort: wake every blocked call on this communicator (and its transport) with ZEN_EABORTED and
 * tell peers, without blocking. Safe from any thread. The communicator must still be destroyed.
 */
ZEN_API void zen_comm_abort(zen_comm *comm);

/*
 * Mark the calling thread as one that drives communication (a thread that runs a communicator's
 * collectives for a compute thread, as zen_torch's worker does): it asks the kernel for the short
 * scheduling slice ZEN_COMM_SLICE_US (Linux >= 6.12), so that when it wakes it preempts a busy
 * compute thread instead of waiting for that thread's slice to end; its CPU share stays the same.
 * zen's own transport threads do this themselves. Returns 1 when the kernel took it, else 0.
 */
ZEN_API int zen_comm_thread_hint(void);

/* Local getters: rank (-1 for NULL), size (0 for NULL), transport kind, and the timeout in seconds
 * of every blocking wait (0 for NULL). */
ZEN_API int zen_comm_rank(const zen_comm *comm);
ZEN_API int zen_comm_size(const zen_comm *comm);
ZEN_API zen_transport_kind zen_comm_transport(const zen_comm *comm);
ZEN_API double zen_comm_timeout(const zen_comm *comm);

/*
 * Host grouping of this rank, from the launcher (ZEN_LOCAL_RANK/ZEN_LOCAL_SIZE,
 * LOCAL_RANK/LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK/SIZE); inproc: all ranks on one host.
 * Local; -1 for a NULL comm.
 */
ZEN_API int zen_comm_local_rank(const zen_comm *comm);
ZEN_API int zen_comm_local_size(const zen_comm *comm);

/*
 * The last error recorded on this communicator, e.g. "rank 3: recv from rank 5 timed out after
 * 300.0 s in allreduce". Owned by the communicator, valid until its next call. "" when none.
 */
ZEN_API const char *zen_comm_last_error(const zen_comm *comm);

/* Byte and message counters. Per-call counters cover the last completed collective or p2p call. */
typedef struct zen_comm_stats {
    uint64_t bytes_sent;
    uint64_t bytes_recv;
    uint64_t msgs_sent;
    uint64_t msgs_recv;
    uint64_t last_bytes_sent;
    uint64_t last_bytes_recv;
    uint64_t last_msgs_sent;
    uint64_t last_msgs_recv;
    uint64_t collectives; /* collectives completed on this communicator */
} zen_comm_stats;

/* Copy this rank's counters into *out (ZEN_EINVAL when either is NULL); reset zeroes them.
 * Local. */
ZEN_API zen_status zen_comm_get_stats(const zen_comm *comm, zen_comm_stats *out);
ZEN_API void zen_comm_reset_stats(zen_comm *comm);

/*
 * Arrival stamps. Each rank records, for each collective it enters, the wall-clock time (ns,
 * CLOCK_REALTIME, so processes on one host compare) at which it arrived and left. The last
 * ZEN_ARRIVAL_HISTORY collectives are kept.
 */
#define ZEN_ARRIVAL_HISTORY 64

typedef struct zen_arrival {
    uint64_t seq;      /* collective sequence number on this communicator (same on all ranks) */
    const char *op;    /* static name of the collective */
    int64_t arrive_ns; /* when this rank entered the call */
    int64_t leave_ns;  /* when it returned */
} zen_arrival;

/* Copy up to max of this rank's most recent arrivals, newest last; *count gets how many. Local.
 * ZEN_EINVAL when comm or count is NULL, or out is NULL with max > 0. */
ZEN_API zen_status zen_comm_arrivals(const zen_comm *comm, zen_arrival *out, size_t max,
                                     size_t *count);

/*
 * Collective: gather every rank's arrival time at the most recent collective that all ranks have
 * completed before this call (the same seq everywhere). arrive_ns must hold size entries; *seq gets
 * the collective's sequence number and *op_name its name (static; seq and op_name may be NULL).
 * Used to report who waits for whom. ZEN_EINVAL before the first collective.
 */
ZEN_API zen_status zen_comm_gather_arrivals(zen_comm *comm, int64_t *arrive_ns, uint64_t *seq,
                                            const char **op_name);

/* ---- Point-to-point. Tags are user values in [0, ZEN_TAG_MAX]. Messages between one pair of
 * ranks with one tag arrive in the order they were sent. ---- */
#define ZEN_TAG_MAX 0x7fffffff

/*
 * Errors of every p2p call: ZEN_EINVAL for a peer outside [0, size), a tag outside
 * [0, ZEN_TAG_MAX], or a NULL buffer with a nonzero length; transport errors as for collectives.
 */

/* Blocking send of bytes to peer; returns when buf may be reused. */
ZEN_API zen_status zen_send(zen_comm *comm, const void *buf, size_t bytes, int peer, int tag);

/*
 * Blocking receive of at most capacity bytes from peer. *received (may be NULL) gets the length.
 * A longer message is an error (ZEN_EPROTO) and is discarded.
 */
ZEN_API zen_status zen_recv(zen_comm *comm, void *buf, size_t capacity, int peer, int tag,
                            size_t *received);

/* Nonblocking variants. The buffer must stay valid until the request completes or is freed. On
 * success the caller owns *req and releases it with zen_request_free (also after it completed). */
ZEN_API zen_status zen_isend(zen_comm *comm, const void *buf, size_t bytes, int peer, int tag,
                             zen_request **req);
ZEN_API zen_status zen_irecv(zen_comm *comm, void *buf, size_t capacity, int peer, int tag,
                             zen_request **req);

/* *done = 1 when finished (then the request's status is returned), 0 otherwise. */
ZEN_API zen_status zen_request_test(zen_request *req, int *done);

/*
 * Wait at most timeout_s seconds (< 0: the communicator's timeout). Returns the request's status
 * or ZEN_ETIMEDOUT (the request stays valid and can be waited on again). *received may be NULL.
 */
ZEN_API zen_status zen_request_wait(zen_request *req, double timeout_s, size_t *received);

/* Release a request. An unfinished receive is cancelled; an unfinished send is completed first.
 * NULL is ok. */
ZEN_API void zen_request_destroy(zen_request *req);

/* Deprecated: the old name of zen_request_destroy (requests are handles, released by _destroy
 * like every handle). Kept so existing callers compile; it does the same. */
ZEN_API void zen_request_free(zen_request *req);

/*
 * ---- Dense collectives. sendbuf == recvbuf means in place. count 0 is valid. ----
 * Every rank calls the same collective with the same count, dtype, op and root (per-rank counts
 * too, except alltoallv's). Ranks that disagree fail, every one of them, instead of hanging or
 * mixing data: the rank that sees it returns ZEN_EMISMATCH with both ranks' arguments in its last
 * error and aborts the communicator, the others fail with that text (ZEN_EABORTED or ZEN_EPEER);
 * the communicator is then poisoned. (The ranks agree on the way, without an extra round trip for
 * a small allreduce: docs/algorithms.md, "Argument agreement".) Buffers stay owned by the caller
 * and are only used during the call. ZEN_EINVAL (no effect, nothing sent) for a bad argument:
 * NULL communicator, invalid dtype or op (or an op the dtype does not support), root out of range,
 * a NULL buffer with a nonzero count, or a size that overflows size_t.
 */

/* Allreduce algorithms; AUTO picks by size and rank count (override: ZEN_ALLREDUCE_ALGO). */
typedef enum zen_allreduce_algo {
    ZEN_ALLREDUCE_AUTO = 0,
    ZEN_ALLREDUCE_RING = 1,
    ZEN_ALLREDUCE_RHD = 2,  /* recursive halving/doubling (Rabenseifner) */
    ZEN_ALLREDUCE_MPI = 3,  /* the MPI library's own (mpi transport with ZEN_MPI_NATIVE=1) */
    ZEN_ALLREDUCE_SLOTS = 4 /* shm latency path: every rank reads every rank's shared slot and
                               reduces (up to ZEN_SHM_SLOT_MAX_BYTES; else ZEN_EUNSUPPORTED) */
} zen_allreduce_algo;

/* Static name of an algorithm ("ring"); never NULL. Thread safe. */
ZEN_API const char *zen_allreduce_algo_name(zen_allreduce_algo algo);

/* Every rank gets the element-wise reduction of all ranks' sendbuf (count elements) in recvbuf. */
ZEN_API zen_status zen_allreduce(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                 zen_dtype dtype, zen_op op);

/* Same, with an explicit algorithm (AUTO behaves as zen_allreduce). */
ZEN_API zen_status zen_allreduce_with(zen_comm *comm, const void *sendbuf, void *recvbuf,
                                      size_t count, zen_dtype dtype, zen_op op,
                                      zen_allreduce_algo algo);

/* The algorithm zen_allreduce would use for this count and dtype on this communicator. */
ZEN_API zen_allreduce_algo zen_allreduce_choice(const zen_comm *comm, size_t count,
                                                zen_dtype dtype);

/* sendbuf holds size*recvcount elements; rank r receives the reduction of block r. */
ZEN_API zen_status zen_reduce_scatter(zen_comm *comm, const void *sendbuf, void *recvbuf,
                                      size_t recvcount, zen_dtype dtype, zen_op op);

/* sendbuf holds sum(recvcounts) elements, blocks in rank order; rank r receives block r. */
ZEN_API zen_status zen_reduce_scatterv(zen_comm *comm, const void *sendbuf, void *recvbuf,
                                       const size_t *recvcounts, zen_dtype dtype, zen_op op);

/* recvbuf holds size*sendcount elements, rank order. In place: sendbuf == recvbuf+rank*count. */
ZEN_API zen_status zen_allgather(zen_comm *comm, const void *sendbuf, void *recvbuf,
                                 size_t sendcount, zen_dtype dtype);

/* Rank r contributes recvcounts[r] elements placed at recvbuf + displs[r] (elements). */
ZEN_API zen_status zen_allgatherv(zen_comm *comm, const void *sendbuf, size_t sendcount,
                                  void *recvbuf, const size_t *recvcounts, const size_t *displs,
                                  zen_dtype dtype);

/* count elements to and from every rank. */
ZEN_API zen_status zen_alltoall(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                zen_dtype dtype);

/* Pairwise exchange with per-rank counts and displacements (elements). Not in place. */
ZEN_API zen_status zen_alltoallv(zen_comm *comm, const void *sendbuf, const size_t *sendcounts,
                                 const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                 const size_t *rdispls, zen_dtype dtype);

/* root's buf (count elements) is copied into buf on every other rank. */
ZEN_API zen_status zen_broadcast(zen_comm *comm, void *buf, size_t count, zen_dtype dtype,
                                 int root);

/* root gets the element-wise reduction of all ranks' sendbuf in recvbuf, which is used on root
 * only (may be NULL elsewhere). */
ZEN_API zen_status zen_reduce(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                              zen_dtype dtype, zen_op op, int root);

/* Root receives size*count elements in rank order; recvbuf may be NULL elsewhere. */
ZEN_API zen_status zen_gather(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                              zen_dtype dtype, int root);

/* The inverse of zen_gather: root's sendbuf holds size*count elements in rank order and rank r
 * receives block r (count elements) in recvbuf; sendbuf is used on root only (may be NULL
 * elsewhere). In place at root: recvbuf == sendbuf + root*count. Root sends each block once,
 * (size-1)/size of sendbuf in all. Collective, like every call here: all ranks with the same
 * count, dtype and root. */
ZEN_API zen_status zen_scatter(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                               zen_dtype dtype, int root);

/* Returns on a rank only once every rank has entered the barrier. */
ZEN_API zen_status zen_barrier(zen_comm *comm);

/* ---- In-process ranks. ---- */

/*
 * A world of n in-process ranks; pass it in zen_comm_options.inproc_world from each rank thread.
 * The caller owns *out; zen_inproc_world_destroy (NULL is ok) releases it once every
 * communicator made from it has been destroyed. ZEN_EINVAL for nranks outside 1..4096.
 */
ZEN_API zen_status zen_inproc_world_create(int nranks, zen_inproc_world **out);
ZEN_API void zen_inproc_world_destroy(zen_inproc_world *world);

/*
 * Run fn on nranks threads. Each thread gets a communicator created with *base (transport,
 * rank, world fields are filled in; base may be NULL) and destroys it when fn returns. A rank
 * whose fn returns an error aborts the world so that no other rank waits forever. rank_status
 * (nranks entries, may be NULL) gets each rank's result. Returns ZEN_OK when every rank succeeded,
 * else the first failing rank's status. Blocks until every rank thread has returned.
 */
typedef zen_status (*zen_rank_fn)(zen_comm *comm, void *arg);
ZEN_API zen_status zen_run_inproc(int nranks, const zen_comm_options *base, zen_rank_fn fn,
                                  void *arg, zen_status *rank_status);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_COMM_H */
