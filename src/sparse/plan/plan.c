/*
 * The sparse planner (plan.h): make, run, observe.
 */
#include "sparse/plan/plan.h"

#include <string.h>

#include "coll/comm_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "sparse/plan/auto.h"
#include "sparse/plan/hier_cost.h"
#include "sparse/plan/net_model.h"
#include "sparse/scheme/hier_host.h"
#include "sparse/scheme/registry.h"
#include "sparse/wire/xchg.h"

/*
 * The per-host form's prediction from the chooser's profile of this call (one consult): the
 * sampled union density over the n ranks gives, interpolated to the L ranks of a host, the
 * predicted density of a host's shard sum after the push, which is the input of the sync across
 * hosts (hier_cost.c). The plan takes the scheme that prediction runs across hosts (AUTO: the
 * cheapest there), so the per-host step runs it without asking the chooser again: the real
 * post-push density exists only after the push. With hierarchy AUTO the per-host form is taken
 * when its prediction is strictly smaller than the flat one of the scheme the call would run flat
 * (AUTO: the chooser's pick, which a flat plan then keeps).
 */
static zen_status plan_hosts(zen_sparse_ctx *ctx, const zen_comm_hosts *g, zen_sparse_plan *plan)
{
    zen_comm *comm = ctx->comm;
    const zen_sparse_options *o = ctx->opts;
    zen_sparse_scheme chosen = ZEN_SPARSE_AUTO;
    zen_status st = zen__sparse_choose(ctx, &chosen);
    if (st != ZEN_OK)
        return st;
    zen_sparse_scheme flat_scheme = o->scheme == ZEN_SPARSE_AUTO ? chosen : o->scheme;
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, comm->size, ctx->stats->density, ZEN_OVERLAP_RANDOM);
    p.levels = 0; /* only gamma^n is known here: interpolate the others */
    p.gamma_n = ctx->stats->gamma_n;
    p.skew = p.skew_n = ctx->stats->skew;
    zen_net_model inter, intra;
    zen__net_model_for_ranks(zen_comm_transport(comm), comm->size, &inter);
    zen__net_model_intra(&inter, &intra);
    zen_hier_shape sh = { comm->size,       g->hosts,          g->max_local,          g->min_local,
                          ctx->local->rows, ctx->local->width, ctx->dense_out == NULL };
    long block = zen__param_long("SPARSE_BLOCK_SIZE");
    zen_sparse_scheme across = o->scheme;
    double hier_s = zen__sparse_predict_hier(&sh, &p, &inter, &intra, block, o->scheme, &across);
    ctx->stats->predicted_hier_s = hier_s;
    plan->inter_scheme = across;
    if (o->hierarchy == ZEN_SPARSE_HIER_ON)
        plan->per_host = 1;
    else
        plan->per_host = zen__sparse_hier_pays(&sh, ctx->stats->predicted_s[flat_scheme], hier_s);
    if (!plan->per_host)
        plan->scheme = flat_scheme;
    return ZEN_OK;
}

zen_status zen__sparse_plan_make(zen_sparse_ctx *ctx, zen_sparse_plan *plan)
{
    const zen_sparse_options *o = ctx->opts;
    plan->per_host = 0;
    plan->scheme = plan->inter_scheme = o->scheme;
    zen_status st = ZEN_OK;
    /* global top-k runs flat: per host, each shard would select its own k */
    if (o->hierarchy != ZEN_SPARSE_HIER_OFF && ctx->comm->size > 1 && !o->global_topk) {
        const zen_comm_hosts *g = NULL;
        if ((st = zen__sparse_hier_group(ctx, &g)) != ZEN_OK)
            return st;
        if (o->hierarchy == ZEN_SPARSE_HIER_ON && o->scheme != ZEN_SPARSE_AUTO)
            plan->per_host = 1; /* nothing to choose */
        else if (o->hierarchy == ZEN_SPARSE_HIER_ON || (g->hosts > 1 && g->max_local > 1))
            st = plan_hosts(ctx, g, plan); /* else flat without asking: one host */
    }
    if (st == ZEN_OK && !plan->per_host && plan->scheme == ZEN_SPARSE_AUTO)
        st = zen__sparse_choose(ctx, &plan->scheme); /* collective: every rank is here */
    /* global top-k: the chooser's pick when it is an owner scheme (its cost knows the pull
     * shrinks), else BALANCED; the pick is agreed, so is this */
    if (st == ZEN_OK && o->global_topk && !zen__sparse_topk_scheme(plan->scheme))
        plan->scheme = ZEN_SPARSE_BALANCED;
    return st;
}

static zen_status run_flat(zen_sparse_ctx *ctx, zen_sparse_scheme scheme)
{
    ctx->stats->scheme = scheme;
    ctx->stats->nnz_in = ctx->local->nnz;
    const zen_sparse_scheme_desc *row = zen__sparse_scheme_row(scheme);
    if (!row)
        return zen__fail(ctx->comm, ZEN_EUNSUPPORTED, "sparse allreduce: scheme %s not built",
                         zen_sparse_scheme_name(scheme));
    int64_t ts = zen_now_ns();
    zen_status st = row->run(ctx);
    if (st == ZEN_OK && ctx->opts->scheme == ZEN_SPARSE_AUTO) {
        double us = zen_us_between(ts, zen_now_ns());
        zen__sparse_auto_observe(ctx, us * 1e-6);
        /* what AUTO ran and how long it took on this rank: ZEN_LOG_LEVEL=debug,
         * ZEN_LOG_SUBSYS=sparse follows its choices call by call */
        ZEN_DEBUG("sparse", "auto ran %s: rows %llu, nnz %llu, %.1f us (predicted %.1f us)",
                  zen_sparse_scheme_name(scheme), (unsigned long long)ctx->local->rows,
                  (unsigned long long)ctx->local->nnz, us, ctx->stats->predicted_s[scheme] * 1e6);
    }
    return st;
}

/* Per host, step 2: the sparse sync of this rank's shard sum across hosts with the scheme the plan
 * chose for it, on h->inter: the caller's arguments were validated and agreed once for the whole
 * call, and the shard is coalesced by construction. Bracketed as its own collective on inter (its
 * deadline, arrival stamps and counters). */
static zen_status across_hosts(zen_sparse_ctx *ctx, zen_sparse_scheme scheme, zen_hier_call *h)
{
    zen_coo in = { 0 };
    zen_status st = zen__coo_from_dense(h->shard, h->shard_rows, ctx->local->width, &in);
    if (st != ZEN_OK)
        return zen__fail(ctx->comm, st, "sparse hier: out of memory extracting the shard");
    zen_sparse_options o = *ctx->opts;
    o.scheme = scheme; /* fixed: no AUTO state is kept or observed on inter */
    o.average = 0;     /* divided by the whole rank count at the end */
    o.hierarchy = ZEN_SPARSE_HIER_OFF;
    o.ranks_per_host = 0;
    o.any_order = false; /* intra_gather checks the shard sums come back ascending */
    zen_sparse_stats is;
    memset(&is, 0, sizeof is);
    zen_sparse_ctx ic = { h->inter, &in, NULL, &h->res, &o, &is, 0, 0, 0 };
    zen_coll cc;
    if ((st = zen__coll_begin(h->inter, "sparse_allreduce", &cc)) == ZEN_OK) {
        st = run_flat(&ic, scheme);
        st = zen__coll_end(h->inter, &cc, st);
    }
    zen__coo_release(&in);
    if (st != ZEN_OK)
        return zen__fail(ctx->comm, st, "sparse hier: inter-host sync failed: %s",
                         zen_comm_last_error(h->inter));
    h->res.rows = h->shard_rows;
    h->res.width = ctx->local->width;
    zen_sparse_stats *s = ctx->stats;
    s->scheme = is.scheme;
    for (int ph = 0; ph < ZEN_PHASE_COUNT; ph++)
        s->phase_us[ph] += is.phase_us[ph];
    s->imbalance_push = is.imbalance_push;
    s->imbalance_pull = is.imbalance_pull;
    return ZEN_OK;
}

zen_status zen__sparse_plan_run(zen_sparse_ctx *ctx, const zen_sparse_plan *plan)
{
    if (!plan->per_host)
        return run_flat(ctx, plan->scheme);
    ctx->stats->scheme = plan->inter_scheme;
    ctx->stats->nnz_in = ctx->local->nnz;
    zen_hier_call h;
    zen_status st = zen__sparse_hier_push(ctx, &h);
    if (st == ZEN_OK && h.inter)
        st = across_hosts(ctx, plan->inter_scheme, &h);
    return zen__sparse_hier_pull(ctx, &h, st);
}
