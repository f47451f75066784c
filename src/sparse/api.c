/*
 * Public entry points of the sparse module: argument validation agreed by all ranks, coalescing,
 * the call's plan (plan/plan.h: made once, run, observed) and statistics.
 *
 * Agreement before data moves: every rank coalesces its input (which validates it) and then all
 * ranks allgather a small record (status, offending index, rows, width, scheme, options). If any
 * rank failed, every rank returns that failure with a message naming the rank, so a bad index on
 * one rank never leaves the others blocked in a push. Ranks that disagree on the shape or the
 * scheme get ZEN_EMISMATCH.
 *
 * The whole call is bracketed as one collective ("sparse_allreduce"), so the dense collectives a
 * scheme uses nest inside it and the communicator's counters give the bytes of the whole call.
 */
#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/checked.h"
#include "common/clock.h"
#include "common/options.h"
#include "sparse/plan/auto.h"
#include "sparse/plan/auto_tune.h"
#include "sparse/plan/plan.h"
#include "sparse/scheme/hier_host.h"
#include "sparse/scheme/registry.h"
#include "sparse/sparse_internal.h"
#include "sparse/wire/coo.h"

/* zen_sparse_stats.predicted_s has a fixed capacity so that a new scheme keeps the public struct's
 * size; past it the struct needs a new version (zen/sparse.h). */
_Static_assert(ZEN_SPARSE_SCHEME_COUNT <= ZEN_SPARSE_STATS_SCHEMES,
               "more schemes than zen_sparse_stats.predicted_s holds");

void zen_sparse_result_free(zen_sparse_result *result)
{
    if (!result)
        return;
    zen__free(result->indices);
    zen__free(result->values);
    memset(result, 0, sizeof *result);
}

/* The record every rank contributes to the agreement allgather. */
enum {
    AG_STATUS,
    AG_BAD_SET, /* 1: AG_BAD_INDEX holds an offending index (any u64 value is possible) */
    AG_BAD_INDEX,
    AG_ROWS,
    AG_WIDTH,
    AG_MODE,
    AG_AUTO_DIGEST, /* AUTO's agreed state for the key (zen__sparse_auto_state), 0: none */
    AG_AUTO_LAST,   /* this rank's seconds of the last keyed AUTO call (double bits) */
    AG_TOPK,        /* opts->global_topk */
    AG_FIELDS
};

static zen_status describe_local_failure(zen_comm *comm, zen_status st, const zen_sparse_tensor *in,
                                         uint64_t bad, int bad_set, const zen_sparse_options *o)
{
    if (st == ZEN_EINVAL && !bad_set && o->global_topk && in && in->width != 1)
        return zen__fail(comm, st,
                         "sparse allreduce: global_topk %zu needs element sparsity (width 1), "
                         "not width %u",
                         o->global_topk, in->width);
    if (st == ZEN_EINVAL && !bad_set && o->global_topk && !zen__sparse_topk_scheme(o->scheme))
        return zen__fail(comm, st,
                         "sparse allreduce: global_topk runs in the owner schemes only (balanced, "
                         "ps or auto), not %s",
                         zen_sparse_scheme_name(o->scheme));
    if (st == ZEN_EINVAL && bad_set && bad > INT64_MAX) /* only an i64 index can be this big */
        return zen__fail(comm, st, "sparse allreduce: negative index %lld",
                         (long long)(int64_t)bad);
    if (st == ZEN_EINVAL && bad_set)
        return zen__fail(comm, st, "sparse allreduce: index %llu >= rows %llu",
                         (unsigned long long)bad, (unsigned long long)in->rows);
    if (st == ZEN_EUNSUPPORTED && in && in->rows >= ((uint64_t)1 << 32))
        return zen__fail(comm, st, "sparse allreduce: rows %llu >= 2^32 unsupported",
                         (unsigned long long)in->rows);
    if (st == ZEN_EUNSUPPORTED)
        return zen__fail(comm, st, "sparse allreduce: nnz too large (>= 2^32 - 1)");
    if (st == ZEN_ENOMEM)
        return zen__fail(comm, st, "sparse allreduce: out of memory coalescing the input");
    return zen__fail(comm, st,
                     "sparse allreduce: invalid arguments (tensor, width, dtype, "
                     "output or options)");
}

/* AUTO's part of the records: the same digest everywhere lets it skip its own exchange. */
static void read_auto(const uint64_t *all, int n, zen_sparse_ctx *ctx)
{
    ctx->auto_agreed = all[AG_AUTO_DIGEST] != 0;
    ctx->auto_last_s = ctx->auto_last_max_s = 0;
    /* the ranks' times matter to an AUTO call only (the digest is 0 for any other); on the stack
     * for the usual rank counts, so the call's path allocates nothing */
    double small[64], *t = NULL;
    if (ctx->auto_agreed)
        t = n <= 64 ? small : zen__malloc_array((size_t)n, sizeof *t);
    for (int r = 0; r < n; r++) {
        const uint64_t *rec = all + (size_t)r * AG_FIELDS;
        double x;
        memcpy(&x, &rec[AG_AUTO_LAST], sizeof x);
        ctx->auto_agreed &= rec[AG_AUTO_DIGEST] == all[AG_AUTO_DIGEST];
        if (t)
            t[r] = x;
        if (x > ctx->auto_last_max_s)
            ctx->auto_last_max_s = x;
    }
    /* out of memory: the slowest rank's time */
    ctx->auto_last_s = t ? zen__auto_tune_call_time(t, (size_t)n) : ctx->auto_last_max_s;
    if (t != small)
        zen__free(t);
}

/* Allgather the records; on any failure or disagreement return the status every rank reports. */
static zen_status agree(zen_comm *comm, const uint64_t *mine, const zen_sparse_tensor *in,
                        int *exchanged, zen_sparse_ctx *ctx)
{
    int n = zen_comm_size(comm);
    *exchanged = 0;
    uint64_t *all = zen__malloc_array((size_t)n * AG_FIELDS, sizeof *all);
    if (!all)
        return zen__fail(comm, ZEN_ENOMEM, "sparse allreduce: out of memory for %d records", n);
    zen_status st = zen_allgather(comm, mine, all, AG_FIELDS, ZEN_I64);
    if (st != ZEN_OK) {
        zen__free(all);
        return st;
    }
    *exchanged = 1;
    read_auto(all, n, ctx);
    zen_status own = (zen_status)(int64_t)mine[AG_STATUS];
    if (own != ZEN_OK) {
        zen__free(all);
        return describe_local_failure(comm, own, in, mine[AG_BAD_INDEX], (int)mine[AG_BAD_SET],
                                      ctx->opts);
    }
    for (int r = 0; r < n && st == ZEN_OK; r++) {
        const uint64_t *rec = all + (size_t)r * AG_FIELDS;
        zen_status their = (zen_status)(int64_t)rec[AG_STATUS];
        if (their != ZEN_OK) {
            if (their == ZEN_EINVAL && rec[AG_BAD_SET] && rec[AG_BAD_INDEX] > INT64_MAX)
                st = zen__fail(comm, their, "sparse allreduce: rank %d passed negative index %lld",
                               r, (long long)(int64_t)rec[AG_BAD_INDEX]);
            else if (their == ZEN_EINVAL && rec[AG_BAD_SET])
                st = zen__fail(
                    comm, their, "sparse allreduce: rank %d passed index %llu >= rows %llu", r,
                    (unsigned long long)rec[AG_BAD_INDEX], (unsigned long long)rec[AG_ROWS]);
            else
                st =
                    zen__fail(comm, their, "sparse allreduce: rank %d failed its input checks (%s)",
                              r, zen_status_name(their));
        } else if (rec[AG_ROWS] != mine[AG_ROWS] || rec[AG_WIDTH] != mine[AG_WIDTH] ||
                   rec[AG_MODE] != mine[AG_MODE]) {
            st = zen__fail(comm, ZEN_EMISMATCH,
                           "sparse allreduce: rank %d has rows %llu width %llu mode %llx, this "
                           "rank rows %llu width %llu mode %llx",
                           r, (unsigned long long)rec[AG_ROWS], (unsigned long long)rec[AG_WIDTH],
                           (unsigned long long)rec[AG_MODE], (unsigned long long)mine[AG_ROWS],
                           (unsigned long long)mine[AG_WIDTH], (unsigned long long)mine[AG_MODE]);
        } else if (rec[AG_TOPK] != mine[AG_TOPK]) {
            st = zen__fail(comm, ZEN_EMISMATCH,
                           "sparse allreduce: rank %d has global_topk %llu, this rank %llu", r,
                           (unsigned long long)rec[AG_TOPK], (unsigned long long)mine[AG_TOPK]);
        }
    }
    zen__free(all);
    return st;
}

static zen_status check_local(const zen_sparse_tensor *in, int has_output, int dense,
                              const zen_sparse_options *opts, zen_coo *local, uint64_t *bad,
                              int *bad_set)
{
    *bad_set = 0;
    if (!in || !has_output || (unsigned)opts->scheme >= ZEN_SPARSE_SCHEME_COUNT)
        return ZEN_EINVAL;
    if ((unsigned)opts->hierarchy > ZEN_SPARSE_HIER_ON || opts->ranks_per_host < 0) /* hier-host */
        return ZEN_EINVAL;
    if (opts->global_topk && (in->width != 1 || !zen__sparse_topk_scheme(opts->scheme)))
        return ZEN_EINVAL;
    /* the structural checks of zen__coo_from_tensor, so that its EINVAL can be told apart from
     * an out-of-range index (which is what its *bad_index then holds) */
    size_t vcount;
    int structural = in->width > 0 && (in->value_type == ZEN_F32 || in->value_type == ZEN_BF16) &&
                     (in->index_type == ZEN_INDEX_U32 || in->index_type == ZEN_INDEX_I64) &&
                     (in->nnz == 0 || (in->indices && in->values)) &&
                     !zen_mul_overflow(in->nnz, in->width, &vcount) &&
                     vcount <= SIZE_MAX / sizeof(float);
    if (!structural)
        return in->rows >= ((uint64_t)1 << 32) ? ZEN_EUNSUPPORTED : ZEN_EINVAL;
    zen_status st = zen__coo_from_tensor(in, local, bad);
    *bad_set = st == ZEN_EINVAL;
    if (st != ZEN_OK)
        return st;
    size_t cells;
    if (dense &&
        (zen_mul_overflow((size_t)in->rows, in->width, &cells) || cells > SIZE_MAX / sizeof(float)))
        return ZEN_EINVAL;
    return ZEN_OK;
}

static zen_status run(zen_comm *comm, const zen_sparse_tensor *in, float *dense_out,
                      zen_coo *coo_out, const zen_sparse_options *opts_in, zen_sparse_stats *stats)
{
    if (!comm)
        return ZEN_EINVAL;
    zen_sparse_options defaults = ZEN_SPARSE_OPTIONS_INIT;
    const zen_sparse_options *opts = opts_in ? opts_in : &defaults;
    if (opts_in && (opts_in->size == ZEN_SPARSE_OPTIONS_V1_SIZE ||
                    opts_in->size == ZEN_SPARSE_OPTIONS_V2_SIZE)) {
        /* a program built before global_topk or any_order: its fields, then this version's
         * defaults */
        memcpy(&defaults, opts_in, opts_in->size);
        defaults.size = sizeof defaults;
        opts = &defaults;
    }
    if (!ZEN_OPTIONS_SIZE_OK(opts))
        return zen__fail(comm, ZEN_EINVAL,
                         "sparse: zen_sparse_options.size %zu is not this zen's (%zu)", opts->size,
                         sizeof *opts);
    zen_sparse_stats scratch;
    if (!stats)
        stats = &scratch;
    memset(stats, 0, sizeof *stats);
    stats->predicted_count = ZEN_SPARSE_SCHEME_COUNT;
    int64_t t0 = zen_now_ns();
    zen_comm_stats before, after;
    zen_comm_get_stats(comm, &before);

    zen_coll cc;
    zen_status st = zen__coll_begin(comm, "sparse_allreduce", &cc);
    if (st != ZEN_OK)
        return st;
    zen_coo local;
    memset(&local, 0, sizeof local);
    uint64_t bad = 0;
    int bad_set = 0;
    int64_t tp = zen_now_ns();
    zen_status lst =
        check_local(in, dense_out || coo_out, dense_out != NULL, opts, &local, &bad, &bad_set);
    stats->phase_us[ZEN_PHASE_PARTITION] += zen_us_between(tp, zen_now_ns());
    uint64_t mine[AG_FIELDS] = { (uint64_t)(int64_t)lst,
                                 (uint64_t)bad_set,
                                 bad,
                                 in ? in->rows : 0,
                                 in ? in->width : 0,
                                 (uint64_t)opts->scheme | ((uint64_t)(opts->average != 0) << 8) |
                                     ((uint64_t)(dense_out != NULL) << 9) |
                                     zen__sparse_hier_mode(opts) << 10 /* hier-host */,
                                 0,
                                 0,
                                 (uint64_t)opts->global_topk };
    zen_sparse_ctx ctx = { comm, &local, dense_out, coo_out, opts, stats, 0, 0, 0 };
    if (lst == ZEN_OK && opts->scheme == ZEN_SPARSE_AUTO) {
        double last_s;
        zen__sparse_auto_state(&ctx, &mine[AG_AUTO_DIGEST], &last_s);
        memcpy(&mine[AG_AUTO_LAST], &last_s, sizeof last_s);
    }
    int agreed = 0;
    st = agree(comm, mine, in, &agreed, &ctx);
    /* Past this point every status other than the agreed argument errors is a failure of this
     * rank alone (out of memory, a lost peer) that may leave the others waiting inside a
     * collective: such a rank aborts the communicator so that they fail fast too. */
    int local_failure = !agreed;
    /* one plan per call: flat or per host and the scheme, chosen once (plan/plan.h) */
    zen_sparse_plan plan = { 0, opts->scheme, opts->scheme };
    if (st == ZEN_OK) {
        st = zen__sparse_plan_make(&ctx, &plan); /* collective: every rank is here */
        local_failure = st != ZEN_OK;
    }
    if (st == ZEN_OK) {
        st = zen__sparse_plan_run(&ctx, &plan);
        /* a scheme that is not built fails on every rank alike, before any message */
        local_failure = st != ZEN_OK && (st != ZEN_EUNSUPPORTED || plan.per_host ||
                                         zen__sparse_scheme_row(plan.scheme));
    }
    if (local_failure && comm->poisoned == ZEN_OK)
        zen_comm_abort(comm);
    zen__coo_release(&local);
    st = zen__coll_end(comm, &cc, st);
    zen_comm_get_stats(comm, &after);
    /* += : the hierarchical form already counted its sub-communicators' traffic */
    stats->bytes_sent += after.bytes_sent - before.bytes_sent;
    stats->bytes_recv += after.bytes_recv - before.bytes_recv;
    stats->msgs_sent += after.msgs_sent - before.msgs_sent;
    stats->msgs_recv += after.msgs_recv - before.msgs_recv;
    stats->total_us = zen_us_between(t0, zen_now_ns());
    return st;
}

zen_status zen_sparse_allreduce_dense(zen_comm *comm, const zen_sparse_tensor *in, float *out_dense,
                                      const zen_sparse_options *opts, zen_sparse_stats *stats)
{
    return run(comm, in, out_dense, NULL, opts, stats);
}

zen_status zen_sparse_allreduce(zen_comm *comm, const zen_sparse_tensor *in, zen_sparse_result *out,
                                const zen_sparse_options *opts, zen_sparse_stats *stats)
{
    if (!out)
        return run(comm, in, NULL, NULL, opts, stats);
    memset(out, 0, sizeof *out);
    zen_coo res;
    memset(&res, 0, sizeof res);
    zen_status st = run(comm, in, NULL, &res, opts, stats);
    if (st != ZEN_OK) {
        zen__coo_release(&res);
        return st;
    }
    out->rows = in->rows;
    out->width = in->width;
    out->nnz = res.nnz;
    out->indices = res.idx;
    out->values = res.val;
    return ZEN_OK;
}
