/*
 * The collective descriptor's checks (zen__coll_check, the one place every dense collective
 * validates its arguments) and tunables shared by the dense collectives. A failed check returns
 * ZEN_EINVAL before the collective starts, so the call has no effect on this rank (its peers,
 * which did start, fail when their deadline passes or when this rank's next collective mismatches).
 */
#include "coll/coll_algos.h"
#include "coll/reduce_op.h"
#include "common/alloc.h"
#include "common/checked.h"
#include "common/tunables.h"

static zen_status check_comm(zen_comm *comm, const char *op)
{
    (void)op;
    return comm ? ZEN_OK : ZEN_EINVAL;
}

static zen_status check_dtype(zen_comm *comm, const char *op, zen_dtype dtype)
{
    if ((unsigned)dtype >= ZEN_DTYPE_COUNT)
        return zen__fail(comm, ZEN_EINVAL, "%s: invalid dtype %d", op, (int)dtype);
    return ZEN_OK;
}

static zen_status check_op(zen_comm *comm, const char *op, zen_dtype dtype, zen_op rop)
{
    zen_status st = check_dtype(comm, op, dtype);
    if (st != ZEN_OK)
        return st;
    if (!zen__reduce_valid(dtype, rop))
        return zen__fail(comm, ZEN_EINVAL, "%s: invalid reduction op %d", op, (int)rop);
    return ZEN_OK;
}

static zen_status check_buf(zen_comm *comm, const char *op, const char *name, const void *buf,
                            size_t count)
{
    if (!buf && count)
        return zen__fail(comm, ZEN_EINVAL, "%s: %s is NULL but the count is %zu", op, name, count);
    return ZEN_OK;
}

static zen_status check_root(zen_comm *comm, const char *op, int root)
{
    if (root < 0 || root >= comm->size)
        return zen__fail(comm, ZEN_EINVAL, "%s: root %d is not a rank of this communicator of %d",
                         op, root, comm->size);
    return ZEN_OK;
}

static zen_status count_bytes(zen_comm *comm, const char *op, size_t count, zen_dtype dtype,
                              size_t *bytes)
{
    if (zen_mul_overflow(count, zen_dtype_size(dtype), bytes))
        return zen__fail(comm, ZEN_EINVAL, "%s: %zu elements of %s overflow size_t", op, count,
                         zen_dtype_name(dtype));
    return ZEN_OK;
}

static size_t buffer_count(const zen_coll_desc *d, size_t count)
{
    return count == ZEN_DESC_TOTAL ? d->total : count;
}

zen_status zen__coll_check(zen_comm *comm, zen_coll_desc *d)
{
    const char *op = d->op;
    zen_status st = check_comm(comm, op);
    if (st == ZEN_OK && (d->checks & ZEN_DESC_REDUCE))
        st = check_op(comm, op, d->dtype, d->rop);
    else if (st == ZEN_OK && (d->checks & ZEN_DESC_DTYPE))
        st = check_dtype(comm, op, d->dtype);
    if (st == ZEN_OK && (d->checks & ZEN_DESC_ROOT))
        st = check_root(comm, op, d->root);
    if (st != ZEN_OK)
        return st;
    size_t blocks = d->blocks ? d->blocks : 1;
    if (zen_mul_overflow(d->count, blocks, &d->total))
        return zen__fail(comm, ZEN_EINVAL, "%s: %zu x %zu elements overflow size_t", op, blocks,
                         d->count);
    if ((st = count_bytes(comm, op, d->total, d->dtype, &d->total_bytes)) != ZEN_OK)
        return st;
    d->bytes = d->count * zen_dtype_size(d->dtype); /* <= total_bytes: cannot overflow */
    if (!d->send_at_root || comm->rank == d->root)
        st = check_buf(comm, op, d->send_name ? d->send_name : "sendbuf", d->sendbuf,
                       buffer_count(d, d->send_count));
    if (st == ZEN_OK && (!d->recv_at_root || comm->rank == d->root))
        st = check_buf(comm, op, "recvbuf", d->recvbuf, buffer_count(d, d->recv_count));
    return st;
}

zen_status zen__coll_start(zen_comm *comm, zen_coll_desc *d, zen_coll *cc)
{
    zen_status st = zen__coll_check(comm, d);
    if (st != ZEN_OK)
        return st;
    int slots = d->slot_path && zen__coll_slot_max(comm) >= (d->bytes ? d->bytes : 1);
    /* the slot path stamps the call after its post (zen__coll_begin_late) */
    st = slots ? zen__coll_begin_late(comm, d->op, cc) : zen__coll_begin(comm, d->op, cc);
    if (st != ZEN_OK)
        return st;
    zen__coll_agree_fill(comm, cc, d, 0);
    cc->slots = slots;
    if (slots)
        return ZEN_OK; /* the slots carry the descriptor with the data */
    st = zen__coll_agree(comm, cc);
    return st == ZEN_OK ? ZEN_OK : zen__coll_end(comm, cc, st);
}

void *zen__coll_scratch_get(zen_comm *comm, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (bytes > ZEN_COLL_SCRATCH_CACHE)
        return zen__malloc(bytes);
    if (comm->coll_scratch_bytes < bytes) {
        zen__free(comm->coll_scratch);
        comm->coll_scratch = zen__malloc(bytes);
        comm->coll_scratch_bytes = comm->coll_scratch ? bytes : 0;
    }
    return comm->coll_scratch;
}

void zen__coll_scratch_put(zen_comm *comm, void *p)
{
    if (p && p != comm->coll_scratch)
        zen__free(p);
}

size_t zen__coll_ring_chunk_bytes(void)
{
    long v = zen__param_long("RING_CHUNK_BYTES"); /* bounded by the tunables table */
    return v > 0 ? (size_t)v : 1;
}

size_t zen__coll_rhd_max_bytes(void)
{
    long v = zen__param_long("RHD_MAX_BYTES");
    return v > 0 ? (size_t)v : 0;
}

size_t zen__coll_allgather_bruck_max_bytes(void)
{
    long v = zen__param_long("ALLGATHER_BRUCK_MAX_BYTES");
    return v > 0 ? (size_t)v : 0;
}

size_t zen__coll_long_bytes(void)
{
    long v = zen__param_long("COLL_LONG_BYTES");
    return v > 0 ? (size_t)v : 0;
}
