/*
 * Cost model formulas (see cost.h). Every term is "latency x messages + bytes / bandwidth" for
 * the busiest rank; the byte counts follow the wire formats of the schemes in this directory, so
 * that the prediction ranks schemes the way the measured times do (zen bench sparse prints both).
 */
#include "sparse/model/cost.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/comm_internal.h"
#include "common/input.h"
#include "common/log.h"
#include "common/tunables.h"
#include "sparse/sparse_internal.h"

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
}

double zen__cost_eq1_factor(int n, double gamma_n)
{
    return ((double)(n - 1) / n) * (gamma_n + 1.0);
}

/* gamma^(2^i) from the profile, or the random model where the profile has no entry. */
static double level_gamma(const zen_sparse_profile *p, int i)
{
    if (i < p->levels && p->gamma[i] > 0)
        return p->gamma[i];
    return zen__cost_gamma_model(ZEN_OVERLAP_RANDOM, p->density, ldexp(1.0, i));
}

double zen__cost_eq2_factor(int n, const zen_sparse_profile *p)
{
    double sum = 0;
    for (int i = 0; (1L << i) < n && i < 62; i++)
        sum += level_gamma(p, i);
    return sum;
}

uint64_t zen__cost_block_rows(uint32_t width, long block_elems)
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

/* log2 max(k, 2): heap levels of a k-way merge. */
static double heap_levels(double k)
{
    return k > 2 ? log2(k) : 1.0;
}

/* One scheme's prediction in parts: latency terms, wire bytes of the busiest rank, compute
 * nanoseconds at a full core, and the messages a rank receives. */
typedef struct cost_parts {
    double lat_s;
    double bytes;
    double cpu_ns;
    double msgs;
} cost_parts;

/* Each scheme's time from its parts: latency, then the wire or the transport CPU (whichever is
 * longer), then compute at the rank's core share, messages' CPU included. */
static void sum_parts(const cost_parts *part, const zen_net_model *net, double N,
                      double out[ZEN_SPARSE_SCHEME_COUNT], double cpu_s[ZEN_SPARSE_SCHEME_COUNT])
{
    const zen_cpu_model *c = &net->cpu;
    double beta = net->bytes_per_s > 0 ? 1.0 / net->bytes_per_s : 0;
    /* Every call first agrees on its arguments (api.c): an allgather of a small record, Bruck's
     * ceil(log2 n) steps. */
    double agree_steps = ceil(log2(N));
    double share = c->share > 0 ? c->share : 1;
    for (int k = 0; k < ZEN_SPARSE_SCHEME_COUNT; k++) {
        if (k == ZEN_SPARSE_AUTO)
            continue;
        double wire = part[k].bytes * beta;
        double xfer = part[k].bytes * c->wire_byte * 1e-9 / share; /* transport CPU */
        double kernels =
            (part[k].cpu_ns * 1e-9 + (part[k].msgs + agree_steps) * net->msg_cpu_s) / share;
        out[k] =
            part[k].lat_s + agree_steps * net->latency_s + (xfer > wire ? xfer : wire) + kernels;
        if (cpu_s)
            cpu_s[k] = kernels + (xfer > wire ? xfer - wire : 0);
    }
}

void zen__sparse_predict_split(int n, uint64_t rows, uint32_t width, const zen_sparse_profile *p,
                               const zen_net_model *net, long block_elems,
                               double out[ZEN_SPARSE_SCHEME_COUNT],
                               double cpu_s[ZEN_SPARSE_SCHEME_COUNT])
{
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        out[s] = 0;
        if (cpu_s)
            cpu_s[s] = 0;
    }
    if (n <= 1 || rows == 0 || width == 0)
        return; /* one rank: nothing moves */
    double a = net->latency_s;
    /* A step in which a rank posts k messages at once (pairwise alltoall, the exchanges of
     * xchg.c) costs one latency plus a small issue overhead per extra message; a ring step is a
     * full latency each, because step t+1 waits for step t. */
    double o = net->overhead_s > 0 ? net->overhead_s : ZEN_COST_MSG_OVERHEAD * a;
    double conc = a + (n > 1 ? (double)(n - 2) : 0) * o;
    double N = n, n1 = n - 1, frac = n1 / N, R = (double)rows, w = width;
    double E = 4 + 4 * w; /* COO bytes per entry */
    double V = 4 * w;     /* value bytes per row */
    double D = R * w * 4; /* dense bytes */
    double d = p->density > 1 ? 1 : (p->density < 0 ? 0 : p->density);
    double nnz = d * R;
    double gn = p->gamma_n > 0 ? p->gamma_n : zen__cost_gamma_model(ZEN_OVERLAP_RANDOM, d, N);
    double nnz_n = min2(gn * nnz, R); /* rows of the global sum */
    double s = p->skew >= 1 ? p->skew : 1, sn = p->skew_n >= 1 ? p->skew_n : s;
    /* Rows in the busiest even range (at most the range itself). */
    double hot = min2(s * nnz / N, R / N), hot_n = min2(sn * nnz_n / N, R / N);
    const zen_cpu_model *c = &net->cpu;
    double cp = c->copy_byte, rd = c->reduce_byte, lgn = heap_levels(N);
    double coalesce = nnz * (c->sort + V * cp); /* api.c coalesces the input for every scheme */
    /* A dense result: zero it and scatter the sum's rows (DENSE reduces in place instead). */
    /* Zeroing is charged as a copy: a memset alone runs about twice as fast on an idle core, but
     * with every core busy (more ranks than cores) half a copy put the inproc grid's model /
     * measured at 0.45-0.78 per scheme, a full copy at 0.62-1.02 (docs/algorithms.md). */
    double zero = D * cp;
    double dense_out = p->dense_output ? zero + nnz_n * V * cp : 0;
    cost_parts part[ZEN_SPARSE_SCHEME_COUNT] = { { 0, 0, 0, 0 } };

    /* 2(n-1) ring steps; densify, reduce (n-1)/n of the vector, and for a sparse result scan it
     * back into COO. */
    part[ZEN_SPARSE_DENSE] = (cost_parts){ 2 * n1 * a, 2 * frac * D,
                                           coalesce + zero + nnz * V * cp + frac * D * rd +
                                               (p->dense_output ? 0 : D * cp + nnz_n * V * cp),
                                           2 * n1 };
    /* sizes, then payloads; every rank merges all n runs */
    part[ZEN_SPARSE_ALLGATHER] = (cost_parts){
        2 * conc, n1 * nnz * E,
        coalesce + nnz * E * cp +
            (p->dense_output ? zero + N * nnz * V * rd : N * nnz * (c->merge * lgn + V * cp)),
        2 * n1
    };
    part[ZEN_SPARSE_PS] =
        (cost_parts){ 4 * conc, n1 * (hot + hot_n) * E,
                      coalesce + nnz * E * cp + N * hot * (c->merge * lgn + V * cp) +
                          hot_n * E * cp + (p->dense_output ? dense_out : nnz_n * E * cp),
                      4 * n1 };
    /* BALANCED: one exchange of sizes and one of the packed per-owner COO slices, then an
     * allgather of the 16-byte blob sizes and the allgatherv of the blobs, each in Bruck's
     * ceil(log2 n) rounds or the ring's n - 1 steps (whichever balanced.c and zen_allgather
     * take for that size); the pull blob of an owner is the smaller of its hash bitmap (+ values)
     * and its COO. */
    double coo_blob = nnz_n * E, bitmap_blob = R / 8 + nnz_n * 4 * w;
    double pull_bytes = min2(coo_blob, bitmap_blob);
    double blob_work = bitmap_blob < coo_blob ? (nnz_n / N + nnz_n) * c->bitmap : 0;
    double lg = ceil(log2(N)), info_bytes = 16 * N;
    double info_steps =
        n > 2 && info_bytes <= (double)zen__param_long("ALLGATHER_BRUCK_MAX_BYTES") ? lg : n1;
    double pull_steps = zen__sparse_pull_uses_bruck(n, pull_bytes) ? lg : n1;
    part[ZEN_SPARSE_BALANCED] =
        (cost_parts){ 2 * conc + (info_steps + pull_steps) * a, frac * (nnz * E + pull_bytes),
                      coalesce + nnz * (c->hash + (4 + V) * cp) + nnz * E * cp +
                          nnz * (c->sort + V * cp) + blob_work + (nnz_n / N + nnz_n) * E * cp +
                          (p->dense_output ? dense_out : nnz_n * (c->merge * lgn + V * cp)),
                      2 * n1 + info_steps + pull_steps };

    int levels = 0;
    while ((2L << levels) <= n && levels < 62)
        levels++;
    double hbytes = 0, hsteps = 0, hcpu = coalesce; /* steps: a message each */
    int went_dense = 0;
    for (int i = 0; i < levels; i++) {
        double run = min2(level_gamma(p, i), N) * nnz; /* entries of the partial sum */
        hsteps += 2;                                   /* size, payload */
        hbytes += min2(run * E, D);
        if (run * E >= D) { /* SparCML's switch: from here on a dense reduce */
            hcpu += (went_dense ? 0 : zero + run * V * cp) + D * rd;
            went_dense = 1;
        } else {
            hcpu += 2 * run * (c->merge2 + V * cp);
        }
    }
    if ((1L << levels) != n) { /* fold and unfold of the ranks beyond the power of two */
        hsteps += 4;
        hbytes += min2(nnz * E, D) + min2(nnz_n * E, D);
        hcpu += 2 * nnz * (c->merge2 + V * cp);
    }
    if (p->dense_output)
        hcpu += went_dense ? 0 : dense_out;
    else if (went_dense)
        hcpu += D * cp + nnz_n * V * cp; /* back to COO */
    part[ZEN_SPARSE_HIERARCHICAL] = (cost_parts){ hsteps * a, hbytes, hcpu, hsteps };

    double brows = min2((double)zen__cost_block_rows(width, block_elems), R);
    double nblocks = ceil(R / brows), entry = 4 + 4 * brows * w;
    double b1 = p->block_density >= 0 ? p->block_density : 1 - pow(1 - d, brows);
    double bn = p->block_density_n >= 0 ? p->block_density_n : 1 - pow(1 - nnz_n / R, brows);
    double bs = p->block_skew >= 1 ? p->block_skew : s;
    double bsn = p->block_skew_n >= 1 ? p->block_skew_n : sn;
    double bhot = min2(bs * b1, 1) * nblocks / N, bhot_n = min2(bsn * bn, 1) * nblocks / N;
    /* densify the local non-zero blocks, owner: zero its range, add n ranks' hot blocks, pack
     * its non-zero ones; everyone: unpack every owner's blocks */
    part[ZEN_SPARSE_BLOCK] =
        (cost_parts){ 4 * conc, n1 * (bhot + bhot_n) * entry,
                      coalesce + b1 * nblocks * entry * cp + zero / N + N * bhot * entry * rd +
                          bhot_n * entry * cp + bn * nblocks * entry * cp + dense_out,
                      4 * n1 };

    sum_parts(part, net, N, out, cpu_s);
    zen_sparse_scheme best = zen__sparse_cheapest(out);
    out[ZEN_SPARSE_AUTO] = out[best];
    if (cpu_s)
        cpu_s[ZEN_SPARSE_AUTO] = cpu_s[best];
}

void zen__sparse_predict(int n, uint64_t rows, uint32_t width, const zen_sparse_profile *p,
                         const zen_net_model *net, long block_elems,
                         double out[ZEN_SPARSE_SCHEME_COUNT])
{
    zen__sparse_predict_split(n, rows, width, p, net, block_elems, out, NULL);
}

int zen__sparse_pull_uses_bruck(int n, double total_bytes)
{
    long max = zen__param_long("SPARSE_PULL_BRUCK_MAX_BYTES");
    return n > 2 && max > 0 && total_bytes <= (double)max;
}

zen_sparse_scheme zen__sparse_cheapest(const double pred[ZEN_SPARSE_SCHEME_COUNT])
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

void zen__net_model_for(zen_transport_kind kind, zen_net_model *net)
{
    zen__net_model_for_ranks(kind, 0, net);
}

/*
 * More ranks than cores on one host (inproc threads, shm processes), over = ranks / cores: each
 * rank gets 1/over of a core for its compute and, inproc, of the copy bandwidth; the messages of
 * a step are issued one after another (overhead = the base latency); and every message costs
 * its receiver ZEN_NET_MSG_CPU_US of CPU (a futex wake-up, the mailbox locks), charged like
 * compute: with the cores saturated, a wait is time some other rank computes, so what adds up
 * is the CPU of all ranks' messages over the cores, not a latency per dependent step. Tiny
 * tensors on the 2-core VM cost 4-7 us per message that way for every scheme, ALLGATHER's and
 * PS's all-to-all (2(n-1), 4(n-1) messages) as much as HIERARCHICAL's pairwise rounds and
 * DENSE's ring (docs/algorithms.md, "Cost model").
 */
static void oversubscribe(zen_net_model *net, double over, int copies_are_bandwidth, int gbps_set)
{
    if (!gbps_set && copies_are_bandwidth)
        net->bytes_per_s /= over;
    net->overhead_s = net->latency_s;
    net->msg_cpu_s = zen__param_double("NET_MSG_CPU_US") * 1e-6;
    if (!(zen__param_double("SPARSE_CPU_SHARE") > 0))
        net->cpu.share = 1 / over;
}

/* Cores online, read once: sysconf opens a file under /sys on every call, and AUTO builds its
 * model on every record exchange (`perf`, 4 inproc ranks on a trace: a fifth of AUTO's CPU). */
static long online_cores(void)
{
    static _Atomic long cores;
    long c = atomic_load_explicit(&cores, memory_order_relaxed);
    if (c == 0) {
        c = sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&cores, c > 0 ? c : -1, memory_order_relaxed);
    }
    return c;
}

void zen__net_model_for_ranks(zen_transport_kind kind, int nranks, zen_net_model *net)
{
    /* Defaults: the transport's own figures (transport/registry.h); a kind without a row (AUTO)
     * is taken for a 10 GbE-class link. */
    const zen_transport_traits *tr = zen__transport_traits(kind);
    double gbps = tr->gbps > 0 ? tr->gbps : 10, lat_us = tr->latency_us > 0 ? tr->latency_us : 50;
    double env_gbps = zen__param_double("NET_GBPS"), env_lat = zen__param_double("NET_LAT_US");
    if (env_gbps > 0)
        gbps = env_gbps;
    if (env_lat > 0)
        lat_us = env_lat;
    net->bytes_per_s = gbps * 1e9 / 8;
    net->latency_s = lat_us * 1e-6;
    net->overhead_s = 0;
    net->msg_cpu_s = 0;
    zen_sparse_cpu_model_default(&net->cpu);
    if (tr->wire_copies >= 0) /* memory copies: 0 when the bandwidth above is the memcpy */
        net->cpu.wire_byte = tr->wire_copies * net->cpu.copy_byte;
    long cores = online_cores();
    int one_host = tr->reach == ZEN_REACH_THREADS || tr->reach == ZEN_REACH_HOST;
    if (one_host && cores > 0 && nranks > cores)
        oversubscribe(net, (double)nranks / cores, tr->wire_copies == 0, env_gbps > 0);
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
