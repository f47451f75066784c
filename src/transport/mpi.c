/*
 * mpi: Open MPI as the transport, so `mpirun -n N zen ...` works unchanged.
 *
 * zen's tags are 64 bits (context id + tag) while MPI tags are small ints, so each zen message
 * is two MPI messages on a private duplicate of MPI_COMM_WORLD: a fixed-size header (MPI tag
 * HDR: magic, kind, zen tag, length) followed by the payload (MPI tag DATA, in chunks of at most
 * 1 GiB so counts fit an int). A per-peer send mutex keeps each header and its payload adjacent.
 *
 * Receiving reuses the mailbox of inproc/tcp: one progress thread blocks in MPI_Mprobe for the
 * next header from anyone, claims the destination with zen__mailbox_deliver_begin (a posted
 * receive buffer, else an unexpected buffer) and receives the payload straight into it. The
 * progress thread only ever waits for a payload whose sender is already sending it, so no cycle
 * of waits can form. Requires MPI_THREAD_MULTIPLE (Open MPI 4 provides it).
 *
 * Failures: errors are returned (MPI_ERRORS_RETURN) and fail the peer's receives; abort sends an
 * ABORT header to every peer (nonblocking, never waited for) carrying the reason.
 */
#include "transport/registry.h"
#include "transport/transport.h"

#ifdef ZEN_HAVE_MPI

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/launcher.h"
#include "common/log.h"
#include "transport/mailbox.h"

#define MPI_TAG_HDR  101
#define MPI_TAG_DATA 102
#define HDR_MAGIC    0x7a656e4du /* "zenM" */
#define CHUNK_MAX    ((size_t)1 << 30)
/* The longest an abort waits for a send lock another thread holds (see mpi_abort). */
#define ABORT_LOCK_NS (250 * (int64_t)1000000)

enum hdr_kind {
    HDR_DATA = 1,
    HDR_ABORT = 2,
    HDR_SHUTDOWN = 3
};

typedef struct mpi_hdr {
    uint32_t magic;
    uint32_t kind;
    uint64_t tag;
    uint64_t len;
} mpi_hdr;

/* MPI communicators for native collectives, one per distinct member list (zen sub-communicators
 * map to these), created on first use. */
#define NATIVE_CACHE 16

typedef struct native_comm {
    int n;
    uint64_t key; /* hash of the member list */
    MPI_Comm comm;
} native_comm;

typedef struct mpi_state {
    MPI_Comm comm;
    native_comm native[NATIVE_CACHE];
    int native_count;
    pthread_mutex_t native_lock;
    zen_mailbox *mailbox;
    pthread_t progress;
    int progress_running;
    pthread_mutex_t *send_locks; /* one per peer */
    int initialized_mpi;
} mpi_state;

#define STATE(t) ((mpi_state *)(t)->impl)

static zen_status mpi_error(zen_transport *t, int rc, const char *what, int peer)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    return zen__transport_fail(t, ZEN_EPEER, "%s rank %d failed: %s", what, peer, msg);
}

static zen_status send_payload(zen_transport *t, int peer, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        size_t n = len < CHUNK_MAX ? len : CHUNK_MAX;
        int rc = MPI_Send(p, (int)n, MPI_BYTE, peer, MPI_TAG_DATA, STATE(t)->comm);
        if (rc != MPI_SUCCESS)
            return mpi_error(t, rc, "send to", peer);
        p += n;
        len -= n;
    }
    return ZEN_OK;
}

static zen_status mpi_isend(zen_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                            zen_treq **req)
{
    *req = NULL;
    if (peer < 0 || peer >= t->size)
        return zen__transport_fail(t, ZEN_EINVAL, "send to rank %d of %d", peer, t->size);
    mpi_state *s = STATE(t);
    mpi_hdr h = { HDR_MAGIC, HDR_DATA, tag, (uint64_t)len };
    pthread_mutex_lock(&s->send_locks[peer]);
    int rc = MPI_Send(&h, (int)sizeof h, MPI_BYTE, peer, MPI_TAG_HDR, s->comm);
    zen_status st =
        rc == MPI_SUCCESS ? send_payload(t, peer, buf, len) : mpi_error(t, rc, "send to", peer);
    pthread_mutex_unlock(&s->send_locks[peer]);
    if (st != ZEN_OK)
        return st;
    return zen__mailbox_send_done(req);
}

static zen_status mpi_irecv(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                            zen_treq **req)
{
    return zen__mailbox_irecv(STATE(t)->mailbox, peer, tag, buf, cap, req);
}

static zen_status mpi_irecv_combine(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                                    const zen_combine *combine, zen_treq **req)
{
    return zen__mailbox_irecv_combine(STATE(t)->mailbox, peer, tag, buf, cap, combine, req);
}

static zen_status mpi_wait(zen_transport *t, zen_treq *req, int64_t deadline_ns, size_t *len)
{
    return zen__mailbox_wait(STATE(t)->mailbox, req, deadline_ns, len);
}

static zen_status mpi_test(zen_transport *t, zen_treq *req, int *done, size_t *len)
{
    return zen__mailbox_test(STATE(t)->mailbox, req, done, len);
}

static void mpi_req_free(zen_transport *t, zen_treq *req)
{
    zen__mailbox_req_free(STATE(t)->mailbox, req);
}

/* Receive len payload bytes from src into dest (NULL: discard through a bounce buffer). */
static int recv_payload(mpi_state *s, int src, char *dest, size_t len)
{
    char bounce[65536];
    while (len > 0) {
        size_t n = len < CHUNK_MAX ? len : CHUNK_MAX;
        if (!dest && n > sizeof bounce)
            n = sizeof bounce;
        int rc = MPI_Recv(dest ? dest : bounce, (int)n, MPI_BYTE, src, MPI_TAG_DATA, s->comm,
                          MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return rc;
        if (dest)
            dest += n;
        len -= n;
    }
    return MPI_SUCCESS;
}

static void handle_abort(zen_transport *t, int src, size_t len)
{
    mpi_state *s = STATE(t);
    char reason[400] = "";
    char msg[512];
    size_t keep = len < sizeof reason - 1 ? len : sizeof reason - 1;
    if (keep > 0 && recv_payload(s, src, reason, keep) != MPI_SUCCESS)
        keep = 0;
    reason[keep] = '\0';
    if (len > keep)
        recv_payload(s, src, NULL, len - keep);
    snprintf(msg, sizeof msg, "rank %d aborted: %s", src, reason);
    zen__mailbox_fail_all(s->mailbox, ZEN_EPEER, msg);
}

static void *progress_main(void *arg)
{
    zen_transport *t = arg;
    mpi_state *s = STATE(t);
    for (;;) {
        MPI_Message m;
        MPI_Status status;
        mpi_hdr h;
        int rc = MPI_Mprobe(MPI_ANY_SOURCE, MPI_TAG_HDR, s->comm, &m, &status);
        if (rc == MPI_SUCCESS)
            rc = MPI_Mrecv(&h, (int)sizeof h, MPI_BYTE, &m, &status);
        if (rc != MPI_SUCCESS) {
            zen__mailbox_fail_all(s->mailbox, ZEN_EPEER, "MPI progress failed; job is broken");
            return NULL;
        }
        int src = status.MPI_SOURCE;
        if (h.magic != HDR_MAGIC) {
            char msg[128];
            snprintf(msg, sizeof msg, "bad header magic 0x%08x from rank %d", h.magic, src);
            zen__mailbox_fail_peer(s->mailbox, src, ZEN_EPROTO, msg);
            continue;
        }
        if (h.kind == HDR_SHUTDOWN && src == t->rank)
            return NULL;
        if (h.kind == HDR_ABORT) {
            handle_abort(t, src, (size_t)h.len);
            continue;
        }
        zen_delivery d;
        zen__mailbox_deliver_begin(s->mailbox, src, h.tag, (size_t)h.len, &d);
        rc = recv_payload(s, src, d.dest, (size_t)h.len);
        if (rc == MPI_SUCCESS) {
            zen__mailbox_deliver_end(s->mailbox, &d);
        } else {
            zen__mailbox_deliver_fail(s->mailbox, &d, ZEN_EPEER, "MPI receive failed");
            zen__mailbox_fail_peer(s->mailbox, src, ZEN_EPEER, "MPI receive failed");
        }
    }
}

static void mpi_abort(zen_transport *t, zen_status status, const char *reason)
{
    /* Nonblocking sends whose requests are never waited for need buffers that outlive this call;
     * an abort happens at most once per transport, so static storage is enough. */
    static mpi_hdr h;
    static char why[400];
    mpi_state *s = STATE(t);
    snprintf(why, sizeof why, "%s", reason ? reason : "aborted");
    size_t len = strlen(why);
    h = (mpi_hdr){ HDR_MAGIC, HDR_ABORT, 0, (uint64_t)len };
    for (int p = 0; p < t->size; p++) {
        if (p == t->rank)
            continue;
        /* Never block long in abort: wait briefly for a peer's send lock (skipping the notice
         * leaves that peer naming the wrong rank), fire and forget. */
        if (!zen_mutex_lock_within(&s->send_locks[p], ABORT_LOCK_NS))
            continue;
        MPI_Request r;
        if (MPI_Isend(&h, (int)sizeof h, MPI_BYTE, p, MPI_TAG_HDR, s->comm, &r) == MPI_SUCCESS)
            MPI_Request_free(&r);
        if (len && MPI_Isend(why, (int)len, MPI_BYTE, p, MPI_TAG_DATA, s->comm, &r) == MPI_SUCCESS)
            MPI_Request_free(&r);
        pthread_mutex_unlock(&s->send_locks[p]);
    }
    zen__mailbox_fail_all(s->mailbox, status == ZEN_OK ? ZEN_EABORTED : status, why);
}

static uint64_t members_key(const int *world_ranks, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)(unsigned)world_ranks[i]) * 1099511628211ull;
    return h;
}

/* The MPI communicator of exactly these members, in this order (collective over them the first
 * time: MPI_Comm_create_group involves only the group's members). */
static zen_status native_comm_for(zen_transport *t, const int *world_ranks, int n, MPI_Comm *out)
{
    mpi_state *s = STATE(t);
    uint64_t key = members_key(world_ranks, n);
    zen_status st = ZEN_OK;
    pthread_mutex_lock(&s->native_lock);
    for (int i = 0; i < s->native_count; i++) {
        if (s->native[i].n == n && s->native[i].key == key) {
            *out = s->native[i].comm;
            pthread_mutex_unlock(&s->native_lock);
            return ZEN_OK;
        }
    }
    if (s->native_count == NATIVE_CACHE) {
        st = zen__transport_fail(t, ZEN_EUNSUPPORTED,
                                 "more than %d communicators use native "
                                 "MPI collectives",
                                 NATIVE_CACHE);
    } else {
        MPI_Group world, group;
        MPI_Comm_group(s->comm, &world);
        MPI_Group_incl(world, n, world_ranks, &group);
        int rc = MPI_Comm_create_group(s->comm, group, 7, out);
        MPI_Group_free(&group);
        MPI_Group_free(&world);
        if (rc != MPI_SUCCESS) {
            st = mpi_error(t, rc, "MPI_Comm_create_group with", world_ranks[0]);
        } else {
            MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
            s->native[s->native_count++] = (native_comm){ n, key, *out };
        }
    }
    pthread_mutex_unlock(&s->native_lock);
    return st;
}

static zen_status mpi_native_allreduce(zen_transport *t, const int *world_ranks, int n,
                                       const void *sendbuf, void *recvbuf, size_t count,
                                       zen_dtype dtype, zen_op op)
{
    static const MPI_Op ops[] = {
        [ZEN_SUM] = MPI_SUM, [ZEN_PROD] = MPI_PROD, [ZEN_MIN] = MPI_MIN, [ZEN_MAX] = MPI_MAX
    };
    MPI_Datatype type;
    switch (dtype) {
    case ZEN_F32:
        type = MPI_FLOAT;
        break;
    case ZEN_F64:
        type = MPI_DOUBLE;
        break;
    case ZEN_I32:
        type = MPI_INT32_T;
        break;
    case ZEN_I64:
        type = MPI_INT64_T;
        break;
    default:
        return zen__transport_fail(t, ZEN_EUNSUPPORTED, "MPI has no %s allreduce",
                                   zen_dtype_name(dtype));
    }
    if ((unsigned)op > ZEN_MAX)
        return zen__transport_fail(t, ZEN_EINVAL, "native allreduce of op %d", (int)op);
    MPI_Comm comm;
    zen_status st = native_comm_for(t, world_ranks, n, &comm);
    if (st != ZEN_OK)
        return st;
    /* MPI counts are ints: reduce in slices of at most INT_MAX elements. */
    size_t esize = zen_dtype_size(dtype);
    for (size_t done = 0; done < count;) {
        size_t part = count - done < 0x7fffffff ? count - done : 0x7fffffff;
        const void *src = sendbuf == recvbuf ? MPI_IN_PLACE : (const char *)sendbuf + done * esize;
        int rc = MPI_Allreduce(src, (char *)recvbuf + done * esize, (int)part, type, ops[op], comm);
        if (rc != MPI_SUCCESS)
            return mpi_error(t, rc, "MPI_Allreduce with", world_ranks[0]);
        done += part;
    }
    return ZEN_OK;
}

static void mpi_destroy(zen_transport *t)
{
    mpi_state *s = STATE(t);
    for (int i = 0; i < s->native_count; i++)
        MPI_Comm_free(&s->native[i].comm);
    pthread_mutex_destroy(&s->native_lock);
    if (s->progress_running) {
        mpi_hdr h = { HDR_MAGIC, HDR_SHUTDOWN, 0, 0 };
        MPI_Send(&h, (int)sizeof h, MPI_BYTE, t->rank, MPI_TAG_HDR, s->comm);
        pthread_join(s->progress, NULL);
    }
    zen__mailbox_destroy(s->mailbox);
    if (s->comm != MPI_COMM_NULL)
        MPI_Comm_free(&s->comm);
    for (int p = 0; s->send_locks && p < t->size; p++)
        pthread_mutex_destroy(&s->send_locks[p]);
    zen__free(s->send_locks);
    zen__transport_base_release(t);
    zen__free(s);
    zen__free(t);
}

static const zen_transport_ops mpi_ops = {
    .name = "mpi",
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .irecv_combine = mpi_irecv_combine,
    .wait = mpi_wait,
    .test = mpi_test,
    .req_free = mpi_req_free,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
    .send_raw = NULL,
    .native_allreduce = mpi_native_allreduce,
};

static void finalize_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
}

static zen_status init_mpi(int *initialized_here)
{
    int initialized = 0, provided = 0;
    *initialized_here = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return ZEN_ESYS;
        *initialized_here = 1;
        atexit(finalize_at_exit);
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        ZEN_ERROR("transport",
                  "the MPI library provides thread level %d; zen's mpi transport "
                  "needs MPI_THREAD_MULTIPLE",
                  provided);
        return ZEN_EUNSUPPORTED;
    }
    return ZEN_OK;
}

zen_status zen__transport_mpi_create(zen_transport **out)
{
    *out = NULL;
    int here = 0;
    zen_status st = init_mpi(&here);
    if (st != ZEN_OK)
        return st;
    zen_transport *t = zen__calloc(1, sizeof *t);
    mpi_state *s = zen__calloc(1, sizeof *s);
    if (!t || !s) {
        zen__free(t);
        zen__free(s);
        return ZEN_ENOMEM;
    }
    s->comm = MPI_COMM_NULL;
    s->initialized_mpi = here;
    pthread_mutex_init(&s->native_lock, NULL);
    int rank = 0, size = 1;
    MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->comm, &rank);
    MPI_Comm_size(s->comm, &size);
    zen__transport_base_init(t, &mpi_ops, s, rank, size);
    MPI_Comm node;
    if (MPI_Comm_split_type(s->comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &t->local_rank);
        MPI_Comm_size(node, &t->local_size);
        MPI_Comm_free(&node);
    }
    s->send_locks = zen__calloc((size_t)size, sizeof *s->send_locks);
    if (!s->send_locks || zen__mailbox_create(t, size, &s->mailbox) != ZEN_OK) {
        mpi_destroy(t);
        return ZEN_ENOMEM;
    }
    for (int p = 0; p < size; p++)
        pthread_mutex_init(&s->send_locks[p], NULL);
    if (pthread_create(&s->progress, NULL, progress_main, t) != 0) {
        mpi_destroy(t);
        return ZEN_ESYS;
    }
    s->progress_running = 1;
    *out = t;
    return ZEN_OK;
}

/* An MPI launcher started this process (common/launcher.h has the rule). */
int zen__transport_mpi_launched(void)
{
    return zen__env_mpi_launcher();
}

#else /* !ZEN_HAVE_MPI */

#include "common/log.h"

zen_status zen__transport_mpi_create(zen_transport **out)
{
    *out = NULL;
    ZEN_ERROR("transport", "this zen was built without MPI: install libopenmpi-dev and rebuild");
    return ZEN_EUNSUPPORTED;
}

int zen__transport_mpi_launched(void)
{
    return 0;
}

#endif

static zen_status mpi_open(const zen_transport_open_args *a, zen_transport **out,
                           zen_transport_kind *kind)
{
    (void)a;
    (void)kind;
    return zen__transport_mpi_create(out);
}

/* A 25 Gb/s fabric (the ZEN paper's testbed A) under MPI, which brings its own rendezvous and
 * its own allreduce. */
const zen_transport_desc zen__transport_mpi_desc = {
    .name = "mpi",
    .kind = ZEN_TRANSPORT_MPI,
    .open = mpi_open,
    .launched = zen__transport_mpi_launched,
    .traits = { .reach = ZEN_REACH_HOSTS,
                .latency_us = 10,
                .gbps = 25,
                .wire_copies = -1,
                .native_allreduce = true },
};
