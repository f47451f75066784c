/*
 * Prediction without communication: public wrappers around the cost model (cost.h), the
 * partitioner (hier_hash.h) and the trace reader (trace.h), so `zen simulate` can evaluate the
 * schemes at 2..1024 ranks on one machine.
 *
 * Measuring gamma^k on index sets: the sets of a trace (R ranks x S steps) are pooled; for k up
 * to the number of sets, gamma^k is the mean over disjoint groups of k consecutive sets of
 * |union| / mean |set|. Beyond that, the union fraction u_K of the largest measured group is
 * extended as if further sets were independent of it: u_k = 1 - (1 - u_K)^(k / K). That is the
 * pessimistic (low-overlap) direction, so predictions for BALANCED are not flattered.
 *
 * Compute: zen_sparse_predict_cpu adds the CPU work of each scheme (cost.h, zen_cpu_model)
 * for the constants given (`zen simulate --cpu FILE`, else the ZEN_SPARSE_NS_PER_* defaults).
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/simulate.h>
#include <zen/sparse.h>

#include "common/alloc.h"
#include "common/input.h"
#include "common/log.h"
#include "sparse/model/cost.h"
#include "sparse/plan/predict.h"
#include "sparse/scheme/registry.h"
#include "sparse/sparse_internal.h"
#include "sparse/wire/hier_hash.h"

zen_status zen_sparse_profile_synthetic(int nranks, double density, const char *overlap,
                                        zen_sparsity_profile *out)
{
    if (nranks < 1 || !(density > 0 && density <= 1) || !overlap || !out)
        return ZEN_EINVAL;
    zen_overlap_model model;
    if (strcmp(overlap, "random") == 0)
        model = ZEN_OVERLAP_RANDOM;
    else if (strcmp(overlap, "identical") == 0)
        model = ZEN_OVERLAP_IDENTICAL;
    else if (strcmp(overlap, "disjoint") == 0)
        model = ZEN_OVERLAP_DISJOINT;
    else
        return ZEN_EINVAL;
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, nranks, density, model);
    memset(out, 0, sizeof *out);
    out->density = p.density;
    out->levels = p.levels < 32 ? p.levels : 32;
    memcpy(out->gamma, p.gamma, (size_t)out->levels * sizeof out->gamma[0]);
    out->gamma_n = p.gamma_n;
    out->skew = p.skew;
    return ZEN_OK;
}

/* Distinct rows in the union of sets[first .. first+k), using mark (rows bytes, zeroed). */
static size_t union_size(const zen_index_sets *s, int first, int k, unsigned char *mark)
{
    size_t count = 0;
    for (int i = first; i < first + k; i++) {
        for (size_t j = 0; j < s->nnz[i]; j++) {
            uint32_t r = s->indices[i][j];
            if (r < s->rows && !mark[r]) {
                mark[r] = 1;
                count++;
            }
        }
    }
    for (int i = first; i < first + k; i++)
        for (size_t j = 0; j < s->nnz[i]; j++)
            if (s->indices[i][j] < s->rows)
                mark[s->indices[i][j]] = 0;
    return count;
}

/* Mean union fraction (of rows) over disjoint groups of k sets. */
static double mean_union_fraction(const zen_index_sets *s, int k, unsigned char *mark)
{
    int groups = s->nsets / k;
    double sum = 0;
    for (int g = 0; g < groups; g++)
        sum += (double)union_size(s, g * k, k, mark) / (double)s->rows;
    return sum / groups;
}

static double gamma_at(const zen_index_sets *s, double k, double mean_density, int kmax,
                       double u_kmax, unsigned char *mark)
{
    double u;
    if (k <= kmax)
        u = mean_union_fraction(s, (int)k, mark);
    else
        u = 1.0 - pow(1.0 - u_kmax, k / kmax);
    return u / mean_density;
}

static double skew_of_sets(const zen_index_sets *s, int n)
{
    size_t *per_range = zen__calloc((size_t)n, sizeof *per_range);
    if (!per_range)
        return 1.0;
    size_t total = 0;
    for (int i = 0; i < s->nsets; i++) {
        for (size_t j = 0; j < s->nnz[i]; j++) {
            uint64_t r = s->indices[i][j];
            if (r >= s->rows)
                continue;
            per_range[(size_t)(r * (uint64_t)n / s->rows)]++;
            total++;
        }
    }
    size_t most = 0;
    for (int j = 0; j < n; j++)
        most = per_range[j] > most ? per_range[j] : most;
    zen__free(per_range);
    return total ? (double)n * (double)most / (double)total : 1.0;
}

zen_status zen_sparse_profile_from_sets(const zen_index_sets *sets, int nranks,
                                        zen_sparsity_profile *out)
{
    if (!sets || !out || nranks < 1 || sets->nsets < 1 || sets->rows == 0 ||
        sets->rows > UINT32_MAX)
        return ZEN_EINVAL;
    unsigned char *mark = zen__calloc((size_t)sets->rows, 1);
    if (!mark)
        return ZEN_ENOMEM;
    memset(out, 0, sizeof *out);
    double mean_density = mean_union_fraction(sets, 1, mark);
    if (!(mean_density > 0)) {
        zen__free(mark);
        return ZEN_EINVAL; /* every set empty: nothing to profile */
    }
    int kmax = 1;
    while (kmax * 2 <= sets->nsets)
        kmax *= 2;
    double u_kmax = mean_union_fraction(sets, kmax, mark);
    out->density = mean_density;
    for (int i = 0; i < 32 && (1L << i) <= nranks; i++)
        out->gamma[out->levels++] =
            gamma_at(sets, (double)(1L << i), mean_density, kmax, u_kmax, mark);
    out->gamma_n = gamma_at(sets, (double)nranks, mean_density, kmax, u_kmax, mark);
    out->skew = skew_of_sets(sets, nranks);
    zen__free(mark);
    return ZEN_OK;
}

zen_status zen_sparse_predict_cpu(int nranks, uint64_t rows, uint32_t width,
                                  const zen_sparsity_profile *profile, double gbps, double lat_us,
                                  const zen_cpu_model *cpu, int dense_output, double *seconds,
                                  double *cpu_s, size_t count)
{
    if (nranks < 1 || rows == 0 || width == 0 || !profile || !(gbps > 0) || lat_us < 0 ||
        !seconds || count == 0 || profile->levels < 0 || profile->levels > 32)
        return ZEN_EINVAL;
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, nranks, profile->density, ZEN_OVERLAP_RANDOM);
    p.density = profile->density;
    p.levels = profile->levels;
    memcpy(p.gamma, profile->gamma, (size_t)profile->levels * sizeof p.gamma[0]);
    p.gamma_n = profile->gamma_n;
    p.skew = profile->skew;
    p.skew_n = profile->skew;
    p.dense_output = dense_output != 0;
    zen_net_model net = { .bytes_per_s = gbps * 1e9 / 8.0, .latency_s = lat_us * 1e-6 };
    if (cpu)
        net.cpu = *cpu;
    /* the model fills the library's scheme count; the caller's arrays hold count, which may be
     * fewer (built against an older header) or more (entries the library has no scheme for: 0) */
    double all[ZEN_SPARSE_SCHEME_COUNT], all_cpu[ZEN_SPARSE_SCHEME_COUNT];
    zen__sparse_predict_split(nranks, rows, width, &p, &net, 0, all, all_cpu);
    for (size_t s = 0; s < count; s++) {
        seconds[s] = s < ZEN_SPARSE_SCHEME_COUNT ? all[s] : 0;
        if (cpu_s)
            cpu_s[s] = s < ZEN_SPARSE_SCHEME_COUNT ? all_cpu[s] : 0;
    }
    return ZEN_OK;
}

zen_status zen_sparse_predict(int nranks, uint64_t rows, uint32_t width,
                              const zen_sparsity_profile *profile, double gbps, double lat_us,
                              double *seconds, size_t count)
{
    return zen_sparse_predict_cpu(nranks, rows, width, profile, gbps, lat_us, NULL, 0, seconds,
                                  NULL, count);
}

zen_status zen_sparse_partition_imbalance(const uint32_t *indices, size_t nnz, int nranks,
                                          uint64_t seed, double *imbalance)
{
    if ((!indices && nnz) || nranks < 1 || !imbalance || nnz >= UINT32_MAX)
        return ZEN_EINVAL;
    *imbalance = nnz ? 0 : 1;
    if (!nnz)
        return ZEN_OK;
    uint64_t seeds[4] = { seed, seed ^ 0x5bd1e995u, seed + 1, seed + 2 };
    zen_hh_config cfg = zen__hh_config_default((uint32_t)nranks, seeds);
    zen_hh_result r;
    zen_status st = zen__hh_partition(&cfg, indices, nnz, &r);
    if (st != ZEN_OK)
        return st;
    size_t most = 0;
    for (int j = 0; j < nranks; j++) {
        size_t load = r.offsets[j + 1] - r.offsets[j];
        most = load > most ? load : most;
    }
    zen__hh_result_free(&r);
    *imbalance = (double)nranks * (double)most / (double)nnz;
    return ZEN_OK;
}

void zen_index_sets_free(zen_index_sets *sets)
{
    if (!sets)
        return;
    for (int i = 0; i < sets->nsets && sets->indices; i++)
        zen__free(sets->indices[i]);
    zen__free(sets->indices);
    zen__free(sets->nnz);
    memset(sets, 0, sizeof *sets);
}

/* Take the indices of the named tensor out of a step (ownership moves to the sets). */
static zen_status take_tensor(zen_trace_step *step, const char *tensor, zen_index_sets *s)
{
    for (size_t t = 0; t < step->count; t++) {
        zen_trace_tensor *tt = &step->tensors[t];
        if (tensor && strcmp(tt->name, tensor) != 0)
            continue;
        if (s->nsets > 0 && (tt->rows != s->rows || tt->width != s->width))
            return ZEN_EMISMATCH;
        uint32_t **idx = zen__realloc(s->indices, (size_t)(s->nsets + 1) * sizeof *idx);
        if (idx)
            s->indices = idx;
        size_t *nnz = zen__realloc(s->nnz, (size_t)(s->nsets + 1) * sizeof *nnz);
        if (nnz)
            s->nnz = nnz;
        if (!idx || !nnz)
            return ZEN_ENOMEM;
        s->rows = tt->rows;
        s->width = tt->width;
        s->indices[s->nsets] = tt->indices;
        s->nnz[s->nsets] = (size_t)tt->nnz;
        s->nsets++;
        tt->indices = NULL;
        tt->nnz = 0;
        return ZEN_OK;
    }
    return ZEN_OK; /* this step does not hold the tensor */
}

/*
 * The named tensor's indices from every file, in name order. All of them are held at once, and
 * the partitioner copies them once more (zen simulate's pull imbalance): the whole set may take
 * half the available memory, checked as each file comes in. The files must agree on the world
 * size, or they come from different runs.
 */
static zen_status read_sets(const char *dir, char **names, size_t count, const char *tensor,
                            zen_index_sets *out)
{
    uint64_t avail = zen__mem_available_bytes(), held = 0;
    uint32_t world = 0;
    zen_status st = ZEN_OK;
    for (size_t i = 0; i < count && st == ZEN_OK; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        zen_trace_step step;
        if ((st = zen_trace_read(path, &step)) != ZEN_OK)
            break;
        if (i > 0 && step.world_size != world) {
            ZEN_ERROR("sparse", "trace: %s was recorded at world size %u, %s/%s at %u", path,
                      step.world_size, dir, names[0], world);
            st = ZEN_EMISMATCH;
        }
        world = step.world_size;
        int before = out->nsets;
        if (st == ZEN_OK)
            st = take_tensor(&step, tensor, out);
        zen_trace_free(&step);
        if (st == ZEN_OK && out->nsets > before)
            held += 2 * (uint64_t)out->nnz[before] * sizeof(uint32_t);
        if (st == ZEN_OK && held > avail / 2) {
            ZEN_ERROR("sparse",
                      "trace: the indices of %s from %s take %.2f GiB by %s, more than half the "
                      "available memory (%.2f GiB); use a directory with fewer steps",
                      tensor ? tensor : "the first tensor", dir, (double)held / 1073741824.0,
                      names[i], (double)avail / 2 / 1073741824.0);
            st = ZEN_ENOMEM;
        }
    }
    return st;
}

static int is_trace_file(const char *name)
{
    size_t len = strlen(name);
    return len > 6 && strcmp(name + len - 6, ".zgrad") == 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

zen_status zen_index_sets_from_trace(const char *dir, const char *tensor, zen_index_sets *out)
{
    if (!dir || !out)
        return ZEN_EINVAL;
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d)
        return ZEN_EIO;
    char **names = NULL;
    size_t count = 0;
    zen_status st = ZEN_OK;
    for (struct dirent *e; st == ZEN_OK && (e = readdir(d));) {
        if (!is_trace_file(e->d_name))
            continue;
        char **grown = zen__realloc(names, (count + 1) * sizeof *names);
        if (!grown || !(grown[count] = zen__strdup(e->d_name))) {
            names = grown ? grown : names;
            st = ZEN_ENOMEM;
            break;
        }
        names = grown;
        count++;
    }
    closedir(d);
    if (names)
        qsort(names, count, sizeof *names, compare_names); /* rank-major: same order each run */
    st = st == ZEN_OK ? read_sets(dir, names, count, tensor, out) : st;
    for (size_t i = 0; i < count; i++)
        zen__free(names[i]);
    zen__free(names);
    if (st == ZEN_OK && out->nsets == 0)
        st = ZEN_EINVAL; /* no trace files, or none holds the tensor */
    if (st != ZEN_OK)
        zen_index_sets_free(out);
    return st;
}

/* Bytes a rank sends in the select of global top-k (scheme/global_topk.c): bins of 512 B, then
 * up to 4 rounds of 256 B, each a small allreduce (modelled as recursive doubling, ceil(log2 n)
 * sends of the whole vector, an upper bound for these sizes). A tie left at the boundary
 * magnitude adds 4 allreduces of 1 KB (lg n x 4 KB); float sums seldom tie there (integer-valued
 * data often does), so the model leaves them out. */
static double topk_select_bytes(int n)
{
    double lg = ceil(log2((double)n));
    return lg * (512.0 + 4 * 256.0);
}

zen_status zen_sparse_topk_volume(int nranks, uint64_t rows, const zen_sparsity_profile *profile,
                                  uint64_t k, double gbps, double lat_us, zen_topk_volume *out)
{
    if (nranks < 1 || rows == 0 || rows >= ((uint64_t)1 << 32) || k == 0 || !profile ||
        !(gbps > 0) || lat_us < 0 || !out || profile->levels < 0 || profile->levels > 32)
        return ZEN_EINVAL;
    memset(out, 0, sizeof *out);
    double kv = (double)k, f = (double)(nranks - 1) / nranks;
    out->ideal_bytes = 2 * f * kv * 4;
    out->bound_bytes = 4 * f * kv * 4;
    out->oktopk_bytes = 6 * kv * 4;
    if (nranks == 1)
        return ZEN_OK;
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, nranks, profile->density, ZEN_OVERLAP_RANDOM);
    p.levels = profile->levels;
    memcpy(p.gamma, profile->gamma, (size_t)profile->levels * sizeof p.gamma[0]);
    p.gamma_n = profile->gamma_n;
    p.skew = p.skew_n = profile->skew;
    zen_net_model net = { .bytes_per_s = gbps * 1e9 / 8.0, .latency_s = lat_us * 1e-6 };
    for (int topk = 0; topk < 2; topk++) {
        p.global_topk = topk ? kv : 0;
        zen_cost_terms t;
        if (!zen__cost_terms_init(&t, nranks, rows, 1, &p, &net, 0))
            continue;
        zen_cost_parts part = zen__sparse_cost_balanced(&t);
        double extra = topk ? topk_select_bytes(nranks) : 0;
        part.bytes += extra;
        double s = zen__cost_seconds(&part, &t, NULL);
        *(topk ? &out->topk_bytes : &out->union_bytes) = part.bytes;
        *(topk ? &out->topk_s : &out->union_s) = s;
        out->select_bytes = extra;
    }
    return ZEN_OK;
}
