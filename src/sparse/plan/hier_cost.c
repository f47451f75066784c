/*
 * Cost model of the hierarchical form (see hier_cost.h). With L ranks on the largest host, S row
 * shards (ranks on the smallest host), H hosts, M = rows * width and E = 4 + 4w COO bytes:
 *
 *   intra reduce-scatter (ring)  (L-1) a_i + min(L-1, S)/S * 4M / b_i
 *   inter sparse sync            cost.c's prediction for H ranks over rows/S rows, at the shard
 *                                density d_L = d * gamma^(n/H) (the intra sum densifies the tensor
 *                                like a sum over n/H ranks) with ratios gamma'^j = gamma^(j n/H) /
 *                                gamma^(n/H), plus the inner call's agreement allgather
 *   intra allgather              counts: (L-1) a_i, then 2 (L-1) a_i + min(L-1, S)/S *
 *                                min(4M, gamma^n d rows * E) / b_i (dense or COO, the cheaper)
 *
 * The flat prediction it is compared with treats every rank pair as an inter-host link (cost.c),
 * which is what ZEN_NET_GBPS describes: the bandwidth each rank gets to a rank on another host.
 */
#include "sparse/plan/hier_cost.h"

#include <math.h>

#include "common/tunables.h"
#include "sparse/plan/predict.h"

void zen__net_model_intra(const zen_net_model *inter, zen_net_model *intra)
{
    double gbps = zen__param_double("NET_INTRA_GBPS"),
           lat_us = zen__param_double("NET_INTRA_LAT_US");
    *intra = *inter;
    intra->bytes_per_s = gbps > 0 ? gbps * 1e9 / 8 : 10 * inter->bytes_per_s;
    intra->latency_s = lat_us > 0 ? lat_us * 1e-6 : inter->latency_s / 5;
    if (inter->overhead_s > 0) /* messages issued one after another: as a step, like inter */
        intra->overhead_s = intra->latency_s;
}

double zen__hier_gamma_at(const zen_sparse_profile *p, int p_n, double k)
{
    if (k <= 1)
        return 1.0;
    double lg = log2(k);
    int i = (int)lround(lg);
    if (fabs(lg - i) < 1e-9 && i < p->levels && p->gamma[i] > 0)
        return p->gamma[i];
    double gn =
        p->gamma_n > 0 ? p->gamma_n : zen__cost_gamma_model(ZEN_OVERLAP_RANDOM, p->density, p_n);
    if (p_n <= 1 || gn <= 1)
        return 1.0;
    return pow(gn, log(k) / log((double)p_n)); /* gamma^1 = 1, gamma^n = gn, log-linear between */
}

static double min2(double a, double b)
{
    return a < b ? a : b;
}

double zen__sparse_predict_hier(const zen_hier_shape *sh, const zen_sparse_profile *p,
                                const zen_net_model *inter, const zen_net_model *intra,
                                long block_elems, zen_sparse_scheme inter_scheme,
                                zen_sparse_scheme *inter_used)
{
    int H = sh->hosts > 0 ? sh->hosts : 1, L = sh->max_local > 0 ? sh->max_local : 1;
    int S = sh->shards > 0 ? sh->shards : 1;
    double R = (double)sh->rows, w = sh->width, M4 = 4 * R * w, E = 4 + 4 * w;
    double ai = intra->latency_s, bi = intra->bytes_per_s > 0 ? 1.0 / intra->bytes_per_s : 0;
    double d = p->density > 1 ? 1 : (p->density < 0 ? 0 : p->density);
    double share = (double)(L - 1 < S ? L - 1 : S) / S; /* of M each rank moves inside the host */

    double t = (L - 1) * ai + share * M4 * bi; /* reduce-scatter */

    double host_ranks = (double)sh->n / H, gl = zen__hier_gamma_at(p, sh->n, host_ranks);
    zen_sparse_profile q;
    zen__sparse_profile_model(&q, H, min2(1, d * gl), ZEN_OVERLAP_RANDOM);
    for (int i = 0; i < q.levels; i++)
        q.gamma[i] = zen__hier_gamma_at(p, sh->n, ldexp(host_ranks, i)) / gl;
    q.gamma_n = zen__hier_gamma_at(p, sh->n, (double)sh->n) / gl;
    q.skew = p->skew >= 1 ? p->skew : 1;
    q.skew_n = p->skew_n >= 1 ? p->skew_n : q.skew;
    uint64_t shard_rows = (sh->rows + (uint64_t)S - 1) / (uint64_t)S;
    double pred[ZEN_SPARSE_SCHEME_COUNT];
    zen__sparse_predict(H, shard_rows, sh->width, &q, inter, block_elems, pred);
    zen_sparse_scheme used = inter_scheme;
    if ((unsigned)used >= ZEN_SPARSE_SCHEME_COUNT || used == ZEN_SPARSE_AUTO)
        used = zen__sparse_cheapest(pred);
    t += pred[used] + (H > 1 ? (H - 1) * inter->latency_s : 0); /* + the inner agreement */
    if (inter_used)
        *inter_used = used;

    double nnz_n = min2(R, zen__hier_gamma_at(p, sh->n, (double)sh->n) * d * R);
    double dense_ag = (L - 1) * ai + share * M4 * bi;
    double coo_ag = 2 * (L - 1) * ai + share * nnz_n * E * bi;
    t += (L - 1) * ai + min2(dense_ag, coo_ag); /* counts, then the cheaper allgather */
    return t;
}

int zen__sparse_hier_pays(const zen_hier_shape *sh, double flat_s, double hier_s)
{
    if (sh->hosts <= 1 || sh->max_local <= 1 || sh->hosts >= sh->n)
        return 0;
    return hier_s < flat_s;
}
