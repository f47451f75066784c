/*
 * Cost model formulas (see cost.h). Every term is "latency x messages + bytes / bandwidth" for
 * the busiest rank; the byte counts follow the wire formats of the schemes in this directory, so
 * that the prediction ranks schemes the way the measured times do (zen bench sparse prints both).
 */
#include "sparse/cost.h"

#include <math.h>
#include <unistd.h>

#include "common/tunables.h"

double zen_cost_gamma_model(zen_overlap_model model, double d, double k)
{
    if (d <= 0 || k <= 1)
        return 1.0;
    if (d > 1)
        d = 1;
    switch (model) {
    case ZEN_OVERLAP_IDENTICAL:
        return 1.0;
    case ZEN_OVERLAP_DISJOINT:
        return k < 1.0 / d ? k : 1.0 / d;
    case ZEN_OVERLAP_RANDOM:
    default:
        return (1.0 - pow(1.0 - d, k)) / d;
    }
}

void zen_sparse_profile_model(zen_sparse_profile *p, int n, double density, zen_overlap_model model)
{
    p->density = density;
    p->levels = 0;
    for (int i = 0; i < ZEN_COST_MAX_LEVELS && (1L << i) <= n; i++)
        p->gamma[p->levels++] = zen_cost_gamma_model(model, density, (double)(1L << i));
    p->gamma_n = zen_cost_gamma_model(model, density, (double)n);
    p->skew = 1.0;
    p->skew_n = 1.0;
    p->block_density = -1.0;
    p->block_density_n = -1.0;
    p->block_skew = 0.0;
    p->block_skew_n = 0.0;
}

double zen_cost_eq1_factor(int n, double gamma_n)
{
    return ((double)(n - 1) / n) * (gamma_n + 1.0);
}

/* gamma^(2^i) from the profile, or the random model where the profile has no entry. */
static double level_gamma(const zen_sparse_profile *p, int i)
{
    if (i < p->levels && p->gamma[i] > 0)
        return p->gamma[i];
    return zen_cost_gamma_model(ZEN_OVERLAP_RANDOM, p->density, ldexp(1.0, i));
}

double zen_cost_eq2_factor(int n, const zen_sparse_profile *p)
{
    double sum = 0;
    for (int i = 0; (1L << i) < n && i < 62; i++)
        sum += level_gamma(p, i);
    return sum;
}

uint64_t zen_cost_block_rows(uint32_t width, long block_elems)
{
    if (block_elems <= 0)
        block_elems = 256;
    uint64_t r = width ? (uint64_t)block_elems / width : 1;
    return r ? r : 1;
}

static double min2(double a, double b)
{
    return a < b ? a : b;
}

void zen_sparse_predict(int n, uint64_t rows, uint32_t width, const zen_sparse_profile *p,
                        const zen_net_model *net, long block_elems,
                        double out[ZEN_SPARSE_SCHEME_COUNT])
{
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        out[s] = 0;
    if (n <= 1 || rows == 0 || width == 0)
        return; /* one rank: nothing moves */
    double a = net->latency_s, beta = net->bytes_per_s > 0 ? 1.0 / net->bytes_per_s : 0;
    /* A step in which a rank posts k messages at once (pairwise alltoall, the exchanges of
     * xchg.c) costs one latency plus a small issue overhead per extra message; a ring step is a
     * full latency each, because step t+1 waits for step t. */
    double o = net->overhead_s > 0 ? net->overhead_s : ZEN_COST_MSG_OVERHEAD * a;
    double conc = a + (n > 1 ? (double)(n - 2) : 0) * o;
    double N = n, n1 = n - 1, frac = n1 / N, R = (double)rows, w = width;
    double E = 4 + 4 * w; /* COO bytes per entry */
    double D = R * w * 4; /* dense bytes */
    double d = p->density > 1 ? 1 : (p->density < 0 ? 0 : p->density);
    double nnz = d * R;
    double gn = p->gamma_n > 0 ? p->gamma_n : zen_cost_gamma_model(ZEN_OVERLAP_RANDOM, d, N);
    double nnz_n = min2(gn * nnz, R); /* rows of the global sum */
    double s = p->skew >= 1 ? p->skew : 1, sn = p->skew_n >= 1 ? p->skew_n : s;
    /* Rows in the busiest even range (at most the range itself). */
    double hot = min2(s * nnz / N, R / N), hot_n = min2(sn * nnz_n / N, R / N);

    out[ZEN_SPARSE_DENSE] = 2 * n1 * a + 2 * frac * D * beta;   /* 2(n-1) ring steps */
    out[ZEN_SPARSE_ALLGATHER] = 2 * conc + n1 * nnz * E * beta; /* sizes, then payloads */
    out[ZEN_SPARSE_PS] = 4 * conc + n1 * (hot + hot_n) * E * beta;
    /* BALANCED: pairwise alltoall of counts, alltoallv of indices and of values, then ring
     * allgather of blob sizes and ring allgatherv of blobs; the pull blob of an owner is the
     * smaller of its hash bitmap (+ values) and its COO. */
    double pull_bytes = min2(nnz_n * E, R / 8 + nnz_n * 4 * w);
    out[ZEN_SPARSE_BALANCED] =
        (n > 1 ? 3 * conc + 2 * n1 * a : 0) + frac * (nnz * E + pull_bytes) * beta;

    int levels = 0;
    while ((2L << levels) <= n && levels < 62)
        levels++;
    double hc = 0;
    for (int i = 0; i < levels; i++)
        hc += 2 * a + min2(min2(level_gamma(p, i), N) * nnz * E, D) * beta;
    if ((1L << levels) != n) /* fold and unfold of the ranks beyond the power of two */
        hc += 4 * a + (min2(nnz * E, D) + min2(nnz_n * E, D)) * beta;
    out[ZEN_SPARSE_HIERARCHICAL] = hc;

    double brows = min2((double)zen_cost_block_rows(width, block_elems), R);
    double nblocks = ceil(R / brows), entry = 4 + 4 * brows * w;
    double b1 = p->block_density >= 0 ? p->block_density : 1 - pow(1 - d, brows);
    double bn = p->block_density_n >= 0 ? p->block_density_n : 1 - pow(1 - nnz_n / R, brows);
    double bs = p->block_skew >= 1 ? p->block_skew : s;
    double bsn = p->block_skew_n >= 1 ? p->block_skew_n : sn;
    double bhot = min2(bs * b1, 1) * nblocks / N, bhot_n = min2(bsn * bn, 1) * nblocks / N;
    out[ZEN_SPARSE_BLOCK] = 4 * conc + n1 * (bhot + bhot_n) * entry * beta;

    out[ZEN_SPARSE_AUTO] = out[zen_sparse_cheapest(out)];
}

zen_sparse_scheme zen_sparse_cheapest(const double pred[ZEN_SPARSE_SCHEME_COUNT])
{
    static const zen_sparse_scheme order[] = { ZEN_SPARSE_BALANCED, ZEN_SPARSE_HIERARCHICAL,
                                               ZEN_SPARSE_DENSE,    ZEN_SPARSE_ALLGATHER,
                                               ZEN_SPARSE_PS,       ZEN_SPARSE_BLOCK };
    zen_sparse_scheme best = order[0];
    for (size_t i = 1; i < sizeof order / sizeof order[0]; i++)
        if (pred[order[i]] < pred[best])
            best = order[i];
    return best;
}

void zen_net_model_for(zen_transport_kind kind, zen_net_model *net)
{
    zen_net_model_for_ranks(kind, 0, net);
}

void zen_net_model_for_ranks(zen_transport_kind kind, int nranks, zen_net_model *net)
{
    /* Defaults: inproc is a memcpy between threads, tcp a 10 GbE-class link, mpi a 25 Gb/s
     * fabric (the paper's testbed A). */
    double gbps = 10, lat_us = 50;
    if (kind == ZEN_TRANSPORT_INPROC) {
        gbps = 40;
        lat_us = 5;
    } else if (kind == ZEN_TRANSPORT_MPI) {
        gbps = 25;
        lat_us = 10;
    }
    double env_gbps = zen_param_double("NET_GBPS"), env_lat = zen_param_double("NET_LAT_US");
    if (env_gbps > 0)
        gbps = env_gbps;
    if (env_lat > 0)
        lat_us = env_lat;
    net->bytes_per_s = gbps * 1e9 / 8;
    net->latency_s = lat_us * 1e-6;
    net->overhead_s = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (kind == ZEN_TRANSPORT_INPROC && cores > 0 && nranks > cores) {
        double share = (double)cores / nranks;
        if (!(env_gbps > 0))
            net->bytes_per_s *= share;
        if (!(env_lat > 0))
            net->latency_s /= share;
        net->overhead_s = net->latency_s;
    }
}
