/*
 * Cost model formulas (see cost.h). Every term is "latency x messages + bytes / bandwidth" for
 * the busiest rank; the byte counts follow the wire formats of the schemes in this directory, so
 * that the prediction ranks schemes the way the measured times do (zen bench sparse prints both).
 */
#include "sparse/model/cost.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/input.h"
#include "common/log.h"
#include "common/tunables.h"

double zen__cost_gamma_model(zen_overlap_model model, double d, double k)
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

void zen__sparse_profile_model(zen_sparse_profile *p, int n, double density,
                               zen_overlap_model model)
{
    p->density = density;
    p->levels = 0;
    for (int i = 0; i < ZEN_COST_MAX_LEVELS && (1L << i) <= n; i++)
        p->gamma[p->levels++] = zen__cost_gamma_model(model, density, (double)(1L << i));
    p->gamma_n = zen__cost_gamma_model(model, density, (double)n);
    p->skew = 1.0;
    p->skew_n = 1.0;
    p->block_density = -1.0;
    p->block_density_n = -1.0;
    p->block_skew = 0.0;
    p->block_skew_n = 0.0;
    p->dense_output = 0;
    p->any_order = 0;
    p->global_topk = 0;
}

double zen__cost_eq1_factor(int n, double gamma_n)
{
    return ((double)(n - 1) / n) * (gamma_n + 1.0);
}

double zen__cost_level_gamma(const zen_sparse_profile *p, int i)
{
    if (i < p->levels && p->gamma[i] > 0)
        return p->gamma[i];
    return zen__cost_gamma_model(ZEN_OVERLAP_RANDOM, p->density, ldexp(1.0, i));
}

double zen__cost_eq2_factor(int n, const zen_sparse_profile *p)
{
    double sum = 0;
    for (int i = 0; (1L << i) < n && i < 62; i++)
        sum += zen__cost_level_gamma(p, i);
    return sum;
}

uint64_t zen__cost_block_rows(uint32_t width, long block_elems)
{
    if (block_elems <= 0)
        block_elems = 256;
    uint64_t r = width ? (uint64_t)block_elems / width : 1;
    return r ? r : 1;
}

/* log2 max(k, 2): heap levels of a k-way merge. */
static double heap_levels(double k)
{
    return k > 2 ? log2(k) : 1.0;
}

double zen__cost_seconds(const zen_cost_parts *part, const zen_cost_terms *t, double *cpu_s)
{
    const zen_net_model *net = t->net;
    const zen_cpu_model *c = &net->cpu;
    double beta = net->bytes_per_s > 0 ? 1.0 / net->bytes_per_s : 0;
    /* Every call first agrees on its arguments (api.c): an allgather of a small record, Bruck's
     * ceil(log2 n) steps. */
    double agree_steps = ceil(log2(t->N));
    double share = c->share > 0 ? c->share : 1;
    double wire = part->bytes * beta;
    double xfer = part->bytes * c->wire_byte * 1e-9 / share; /* transport CPU */
    double kernels = (part->cpu_ns * 1e-9 + (part->msgs + agree_steps) * net->msg_cpu_s) / share;
    if (cpu_s)
        *cpu_s = kernels + (xfer > wire ? xfer - wire : 0);
    return part->lat_s + agree_steps * net->latency_s + (xfer > wire ? xfer : wire) + kernels;
}

int zen__cost_terms_init(zen_cost_terms *t, int n, uint64_t rows, uint32_t width,
                         const zen_sparse_profile *p, const zen_net_model *net, long block_elems)
{
    memset(t, 0, sizeof *t);
    t->p = p;
    t->net = net;
    t->n = n;
    t->width = width;
    t->block_elems = block_elems;
    if (n <= 1 || rows == 0 || width == 0)
        return 0; /* one rank: nothing moves */
    double a = net->latency_s;
    /* A step in which a rank posts k messages at once (pairwise alltoall, the exchanges of
     * xchg.c) costs one latency plus a small issue overhead per extra message; a ring step is a
     * full latency each, because step t+1 waits for step t. */
    double o = net->overhead_s > 0 ? net->overhead_s : ZEN_COST_MSG_OVERHEAD * a;
    t->a = a;
    t->conc = a + (n > 1 ? (double)(n - 2) : 0) * o;
    t->N = n;
    t->n1 = n - 1;
    t->frac = t->n1 / t->N;
    t->R = (double)rows;
    t->w = width;
    t->E = 4 + 4 * t->w;    /* COO bytes per entry */
    t->V = 4 * t->w;        /* value bytes per row */
    t->D = t->R * t->w * 4; /* dense bytes */
    t->d = p->density > 1 ? 1 : (p->density < 0 ? 0 : p->density);
    t->nnz = t->d * t->R;
    double gn = p->gamma_n > 0 ? p->gamma_n : zen__cost_gamma_model(ZEN_OVERLAP_RANDOM, t->d, t->N);
    t->nnz_n = zen_cost_min2(gn * t->nnz, t->R);
    t->s = p->skew >= 1 ? p->skew : 1;
    t->sn = p->skew_n >= 1 ? p->skew_n : t->s;
    /* Rows in the busiest even range (at most the range itself). */
    t->hot = zen_cost_min2(t->s * t->nnz / t->N, t->R / t->N);
    t->hot_n = zen_cost_min2(t->sn * t->nnz_n / t->N, t->R / t->N);
    const zen_cpu_model *c = &net->cpu;
    t->cp = c->copy_byte;
    t->rd = c->reduce_byte;
    t->lgn = heap_levels(t->N);
    t->coalesce =
        t->nnz * (c->sort + t->V * t->cp); /* api.c coalesces the input for every scheme */
    /* A dense result: zero it and scatter the sum's rows (DENSE reduces in place instead).
     * Zeroing is charged as a copy: a memset alone runs about twice as fast on an idle core, but
     * with every core busy (more ranks than cores) half a copy put the inproc grid's model /
     * measured at 0.45-0.78 per scheme, a full copy at 0.62-1.02 (docs/algorithms.md). */
    t->zero = t->D * t->cp;
    t->keep = 1;
    t->E_pull_bal = t->E_pull_ps = t->E;
    if (p->global_topk > 0) {
        t->keep = t->nnz_n > p->global_topk ? p->global_topk / t->nnz_n : 1;
        t->topk_steps = 5 * ceil(log2(t->N)); /* a boundary tie adds 4 rounds (seldom) */
        double kept = t->keep * t->nnz_n > 1 ? t->keep * t->nnz_n : 1;
        t->E_pull_bal = t->V + zen_cost_min2(4, zen__cost_gap_bytes(t->R / kept * t->N));
        t->E_pull_ps = t->V + zen__cost_gap_bytes(t->R / kept); /* always gap-coded */
    }
    t->dense_out = p->dense_output ? t->zero + t->keep * t->nnz_n * t->V * t->cp : 0;
    return 1;
}

double zen__cost_gap_bytes(double g)
{
    double b = 1;
    for (int m = 1; m <= 4 && g > 0; m++)
        b += exp(-ldexp(1.0, 7 * m) / g);
    return b;
}

int zen__sparse_pull_uses_bruck(int n, double total_bytes)
{
    long max = zen__param_long("SPARSE_PULL_BRUCK_MAX_BYTES");
    return n > 2 && max > 0 && total_bytes <= (double)max;
}

/* The constants by name: tunable (without ZEN_), field. */
static const struct cpu_key {
    const char *name;
    size_t offset;
} cpu_keys[] = {
    { "SPARSE_NS_PER_SORT", offsetof(zen_cpu_model, sort) },
    { "SPARSE_NS_PER_HASH", offsetof(zen_cpu_model, hash) },
    { "SPARSE_NS_PER_MERGE", offsetof(zen_cpu_model, merge) },
    { "SPARSE_NS_PER_MERGE2", offsetof(zen_cpu_model, merge2) },
    { "SPARSE_NS_PER_BITMAP", offsetof(zen_cpu_model, bitmap) },
    { "SPARSE_NS_PER_COPY_BYTE", offsetof(zen_cpu_model, copy_byte) },
    { "SPARSE_NS_PER_REDUCE_BYTE", offsetof(zen_cpu_model, reduce_byte) },
    { "SPARSE_NS_PER_WIRE_BYTE", offsetof(zen_cpu_model, wire_byte) },
    { "SPARSE_CPU_SHARE", offsetof(zen_cpu_model, share) },
};

static double *cpu_field(zen_cpu_model *cpu, size_t i)
{
    return (double *)((char *)cpu + cpu_keys[i].offset);
}

void zen_sparse_cpu_model_default(zen_cpu_model *cpu)
{
    for (size_t i = 0; i < sizeof cpu_keys / sizeof cpu_keys[0]; i++) {
        double v = zen__param_double(cpu_keys[i].name);
        *cpu_field(cpu, i) = v > 0 ? v : 0;
    }
    if (!(cpu->share > 0))
        cpu->share = 1;
}

zen_status zen_sparse_cpu_model_write(const zen_cpu_model *cpu, FILE *f)
{
    if (!cpu || !f)
        return ZEN_EINVAL;
    zen_cpu_model c = *cpu;
    for (size_t i = 0; i < sizeof cpu_keys / sizeof cpu_keys[0]; i++)
        if (fprintf(f, "ZEN_%s=%.6g\n", cpu_keys[i].name, *cpu_field(&c, i)) < 0)
            return ZEN_EIO;
    return fflush(f) == 0 ? ZEN_OK : ZEN_EIO;
}

zen_status zen_sparse_cpu_model_read(const char *path, zen_cpu_model *cpu)
{
    if (!path || !cpu)
        return ZEN_EINVAL;
    /* a constants file is a few lines: refuse devices, FIFOs and anything over 1 MiB */
    uint64_t size = 0;
    char why[512];
    FILE *f = zen__open_input(path, 1 << 20, &size, why, sizeof why);
    if (!f) {
        ZEN_WARN("sparse", "cpu model: %s", why);
        return ZEN_EIO;
    }
    char line[256];
    zen_status st = ZEN_OK;
    int known = 0; /* a file without a single constant is not a constants file (/etc/passwd) */
    while (st == ZEN_OK && fgets(line, sizeof line, f)) {
        const char *key = line;
        if (strncmp(key, "export ", 7) == 0)
            key += 7;
        if (strncmp(key, "ZEN_", 4) != 0)
            continue; /* comments, blank lines, other settings */
        key += 4;
        for (size_t i = 0; i < sizeof cpu_keys / sizeof cpu_keys[0]; i++) {
            size_t len = strlen(cpu_keys[i].name);
            if (strncmp(key, cpu_keys[i].name, len) != 0 || key[len] != '=')
                continue;
            char *end = NULL;
            double v = strtod(key + len + 1, &end);
            while (end && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
                end++;
            if (!end || end == key + len + 1 || *end != '\0' || !(v >= 0) || isinf(v))
                st = ZEN_ECORRUPT;
            else
                *cpu_field(cpu, i) = v;
            known++;
        }
    }
    fclose(f);
    return st == ZEN_OK && known == 0 ? ZEN_ECORRUPT : st;
}
