/*
 * The compute term of the sparse cost model (src/sparse/model/cost.c, zen_cpu_model): each constant
 * alone against the work written out by hand for a small tensor (cost.h lists what each scheme
 * does), the overlap rule (transport CPU against the wire: max; kernels: added; both / share),
 * the network models AUTO gets, and the constants file of `zen simulate --calibrate`.
 *
 * The tensor: n = 4 ranks, 1000 rows of width 2, 100 non-zero rows per rank, every rank the
 * same rows (gamma = 1, so the sum has 100 rows), skew 1. Then V = 8 value bytes per row, E = 12
 * COO bytes per entry, D = 8000 dense bytes, the busiest range holds 25 rows. An infinitely fast
 * network without latency leaves only the compute.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zen/simulate.h>
#include <zen/sparse.h>

#include "sparse/model/cost.h"
#include "sparse/plan/net_model.h"
#include "sparse/plan/predict.h"
#include "testutil.h"

#define NS 1e-9

static void predict(const zen_cpu_model *cpu, double density, int dense_output,
                    double out[ZEN_SPARSE_SCHEME_COUNT])
{
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, 4, density, ZEN_OVERLAP_IDENTICAL);
    p.dense_output = dense_output;
    zen_net_model net = { .bytes_per_s = 1e30, .latency_s = 0 };
    net.cpu = *cpu;
    zen__sparse_predict(4, 1000, 2, &p, &net, 256, out);
}

static void expect(const double *got, const double *want_ns)
{
    for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        if (fabs(got[s] - want_ns[s] * NS) > 1e-9 * want_ns[s] * NS + 1e-20)
            fail_msg("scheme %s: predicted %.9g s, expected %.9g s",
                     zen_sparse_scheme_name((zen_sparse_scheme)s), got[s], want_ns[s] * NS);
    }
}

/* Indexed by zen_sparse_scheme: AUTO (unused), BALANCED, HIERARCHICAL, ALLGATHER, BLOCK, PS,
 * DENSE -- filled by name below so the order of the enum does not matter. */
typedef struct want {
    double balanced, hierarchical, allgather, block, ps, dense;
} want;

static void to_array(const want *w, double *a)
{
    memset(a, 0, ZEN_SPARSE_SCHEME_COUNT * sizeof *a);
    a[ZEN_SPARSE_BALANCED] = w->balanced;
    a[ZEN_SPARSE_HIERARCHICAL] = w->hierarchical;
    a[ZEN_SPARSE_ALLGATHER] = w->allgather;
    a[ZEN_SPARSE_BLOCK] = w->block;
    a[ZEN_SPARSE_PS] = w->ps;
    a[ZEN_SPARSE_DENSE] = w->dense;
}

static void check(const zen_cpu_model *cpu, double density, int dense_output, const want *w)
{
    double got[ZEN_SPARSE_SCHEME_COUNT], a[ZEN_SPARSE_SCHEME_COUNT];
    predict(cpu, density, dense_output, got);
    to_array(w, a);
    expect(got, a);
}

/* Without constants the compute term is zero: exactly the network-only model. */
static void test_zero_constants(void **state)
{
    (void)state;
    zen_cpu_model none = { 0 };
    want w = { 0, 0, 0, 0, 0, 0 };
    check(&none, 0.1, 0, &w);
    check(&none, 0.1, 1, &w);
}

/* Per-index kernels: sort (coalesce, twice in BALANCED), hash, the k-way merge (log2 4 = 2 heap
 * levels), the two-way merge (2 rounds of 100 + 100 entries), bitmap rows of the sum (encode the
 * owner's 25 + decode all 100; the bitmap blob 125 + 800 bytes beats the COO blob of 1200). */
static void test_index_kernels(void **state)
{
    (void)state;
    zen_cpu_model c = { .sort = 1, .share = 1 };
    want sort = { 200, 100, 100, 100, 100, 100 };
    check(&c, 0.1, 0, &sort);
    c = (zen_cpu_model){ .hash = 1 };
    want hash = { 100, 0, 0, 0, 0, 0 };
    check(&c, 0.1, 0, &hash);
    c = (zen_cpu_model){ .merge = 1 };
    /* allgather 4 runs x 100 x 2 levels; ps owner 4 x 25 x 2; balanced the 100-row sum x 2 */
    want merge = { 200, 0, 800, 0, 200, 0 };
    check(&c, 0.1, 0, &merge);
    /* a dense result is scattered, not merged: only PS's owner merge remains */
    want merge_dense = { 0, 0, 0, 0, 200, 0 };
    check(&c, 0.1, 1, &merge_dense);
    c = (zen_cpu_model){ .merge2 = 1 };
    want merge2 = { 0, 400, 0, 0, 0, 0 };
    check(&c, 0.1, 0, &merge2);
    c = (zen_cpu_model){ .bitmap = 1 };
    want bitmap = { 125, 0, 0, 0, 0, 0 };
    check(&c, 0.1, 0, &bitmap);
}

/* Per-byte kernels, sparse and dense result. BLOCK: 128 rows per block, 8 blocks of 1028 bytes,
 * each non-zero with probability b = 1 - 0.9^128, 2 blocks per owner range. */
static void test_byte_kernels(void **state)
{
    (void)state;
    double b = 1 - pow(0.9, 128);
    zen_cpu_model c = { .copy_byte = 1 };
    /* coalesce 800 in all. dense: densify 8000 + 800, extract 8000 + 800. allgather: pack 1200,
     * merge values 3200. ps: pack 1200, owner merge 800, pack 300, concatenation 1200. balanced:
     * gather 1200, unpack the received 1200, owner coalesce 800, blobs (25 + 100) x 12, decoded
     * values 800. hierarchical:
     * 2 rounds x 200 entries x 8. block: densify 8 b 1028, zero the range 2000, pack 2 b 1028,
     * unpack 8 b 1028. */
    want copy = { 6300, 4000, 5200, 800 + 8 * b * 1028 + 2000 + 2 * b * 1028 + 8 * b * 1028,
                  4300, 18400 };
    check(&c, 0.1, 0, &copy);
    /* dense result: memset 8000 + scatter 800 everywhere but DENSE (in place, no extraction);
     * ALLGATHER zeroes and scatter-adds instead of merging (the adds are reduce bytes) */
    want copy_dense = { 14300, 12800,
                        10000, 800 + 8 * b * 1028 + 2000 + 2 * b * 1028 + 8 * b * 1028 + 8800,
                        11900, 9600 };
    check(&c, 0.1, 1, &copy_dense);
    c = (zen_cpu_model){ .reduce_byte = 1 };
    /* dense: reduce-scatter 3/4 of 8000; block: the owner adds 4 ranks x 2 b blocks */
    want reduce = { 0, 0, 0, 4 * 2 * b * 1028, 0, 6000 };
    check(&c, 0.1, 0, &reduce);
    want reduce_dense = { 0, 0, 3200, 4 * 2 * b * 1028, 0, 6000 };
    check(&c, 0.1, 1, &reduce_dense);
}

/* 90% density: a partial sum of 900 x 12 bytes exceeds the 8000-byte vector, so HIERARCHICAL
 * reduces dense vectors from the first round (2 x 8000 reduce bytes), densifies once and scans
 * the vector back into COO (copies: coalesce 7200, densify: zero 8000 + scatter 7200, extract
 * 8000 + 7200). */
static void test_hierarchical_goes_dense(void **state)
{
    (void)state;
    zen_cpu_model c = { .reduce_byte = 1 };
    double got[ZEN_SPARSE_SCHEME_COUNT];
    predict(&c, 0.9, 0, got);
    assert_float_equal(got[ZEN_SPARSE_HIERARCHICAL], 16000 * NS, 1e-15);
    c = (zen_cpu_model){ .copy_byte = 1 };
    predict(&c, 0.9, 0, got);
    assert_float_equal(got[ZEN_SPARSE_HIERARCHICAL], 37600 * NS, 1e-15);
    c = (zen_cpu_model){ .merge2 = 1 };
    predict(&c, 0.9, 0, got);
    assert_float_equal(got[ZEN_SPARSE_HIERARCHICAL], 0, 1e-20);
}

/* Kernels add to the wire time; the transport's CPU overlaps it (max); both stretch by 1/share;
 * cpu_s is what the compute adds to the network-only prediction. */
static void test_overlap_and_share(void **state)
{
    (void)state;
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, 4, 0.1, ZEN_OVERLAP_IDENTICAL);
    zen_net_model net = { .bytes_per_s = 1e9, .latency_s = 0 }; /* 1 ns per byte */
    double base[ZEN_SPARSE_SCHEME_COUNT], t[ZEN_SPARSE_SCHEME_COUNT], cpu[ZEN_SPARSE_SCHEME_COUNT];
    zen__sparse_predict(4, 1000, 2, &p, &net, 256, base);
    /* allgather moves 3 x 100 x 12 = 3600 bytes: 3.6 us on the wire */
    assert_float_equal(base[ZEN_SPARSE_ALLGATHER], 3600 * NS, 1e-15);

    net.cpu.wire_byte = 0.5; /* the transport keeps up with the link: hidden */
    zen__sparse_predict_split(4, 1000, 2, &p, &net, 256, t, cpu);
    for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        assert_float_equal(t[s], base[s], 1e-15);
        assert_float_equal(cpu[s], 0, 1e-20);
    }
    net.cpu.wire_byte = 2; /* the CPU is the limit: 2 ns per byte instead of 1 */
    zen__sparse_predict_split(4, 1000, 2, &p, &net, 256, t, cpu);
    assert_float_equal(t[ZEN_SPARSE_ALLGATHER], 7200 * NS, 1e-15);
    assert_float_equal(cpu[ZEN_SPARSE_ALLGATHER], 3600 * NS, 1e-15);
    net.cpu.share = 0.5; /* half a core: 4 ns per byte */
    zen__sparse_predict_split(4, 1000, 2, &p, &net, 256, t, cpu);
    assert_float_equal(t[ZEN_SPARSE_ALLGATHER], 14400 * NS, 1e-15);

    /* kernels add: sort 1 ns per index = 100 ns on top of the wire, 200 ns at half a core */
    net.cpu = (zen_cpu_model){ .sort = 1, .share = 0.5 };
    zen__sparse_predict_split(4, 1000, 2, &p, &net, 256, t, cpu);
    for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        double extra = s == ZEN_SPARSE_BALANCED ? 400 : 200;
        assert_float_equal(t[s], base[s] + extra * NS, 1e-15);
        assert_float_equal(cpu[s], extra * NS, 1e-15);
    }
    /* AUTO is the cheapest total, and carries that scheme's compute part */
    zen_sparse_scheme best = zen__sparse_cheapest(t);
    assert_float_equal(t[ZEN_SPARSE_AUTO], t[best], 0);
    assert_float_equal(cpu[ZEN_SPARSE_AUTO], cpu[best], 0);
}

/* The compute model can change AUTO's choice: on a fast link, ALLGATHER's merge of every rank's
 * rows costs more than HIERARCHICAL's log2 n two-way merges. */
static void test_compute_changes_choice(void **state)
{
    (void)state;
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, 64, 0.01, ZEN_OVERLAP_IDENTICAL);
    zen_net_model net = { .bytes_per_s = 1e30, .latency_s = 0 };
    net.cpu = (zen_cpu_model){ .merge = 10, .merge2 = 1, .copy_byte = 0.1, .share = 1 };
    double t[ZEN_SPARSE_SCHEME_COUNT];
    zen__sparse_predict(64, 1 << 20, 8, &p, &net, 256, t);
    assert_true(t[ZEN_SPARSE_HIERARCHICAL] < t[ZEN_SPARSE_ALLGATHER]);
    assert_int_not_equal(zen__sparse_cheapest(t), ZEN_SPARSE_ALLGATHER);
}

/* The models AUTO gets: the tunables' constants; inproc counts no transport CPU and gives each
 * oversubscribed rank cores/nranks of a core unless ZEN_SPARSE_CPU_SHARE says otherwise. */
static void test_net_model_constants(void **state)
{
    (void)state;
    setenv("ZEN_SPARSE_NS_PER_SORT", "3.5", 1);
    setenv("ZEN_SPARSE_NS_PER_WIRE_BYTE", "0.75", 1);
    zen_net_model tcp, inproc;
    zen__net_model_for_ranks(ZEN_TRANSPORT_TCP, 8, &tcp);
    assert_float_equal(tcp.cpu.sort, 3.5, 0);
    assert_float_equal(tcp.cpu.wire_byte, 0.75, 0);
    assert_float_equal(tcp.cpu.share, 1, 0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    zen__net_model_for_ranks(ZEN_TRANSPORT_INPROC, (int)cores * 4, &inproc);
    assert_float_equal(inproc.cpu.sort, 3.5, 0);
    assert_float_equal(inproc.cpu.wire_byte, 0, 0);
    assert_float_equal(inproc.cpu.share, 0.25, 1e-12);
    setenv("ZEN_SPARSE_CPU_SHARE", "0.5", 1);
    zen__net_model_for_ranks(ZEN_TRANSPORT_INPROC, (int)cores * 4, &inproc);
    assert_float_equal(inproc.cpu.share, 0.5, 0);
    zen__net_model_for_ranks(ZEN_TRANSPORT_TCP, 8, &tcp);
    assert_float_equal(tcp.cpu.share, 0.5, 0);
    unsetenv("ZEN_SPARSE_CPU_SHARE");
    unsetenv("ZEN_SPARSE_NS_PER_SORT");
    unsetenv("ZEN_SPARSE_NS_PER_WIRE_BYTE");
}

static int same_model(const zen_cpu_model *a, const zen_cpu_model *b)
{
    const double *x = (const double *)a, *y = (const double *)b;
    for (size_t i = 0; i < sizeof *a / sizeof(double); i++)
        if (fabs(x[i] - y[i]) > 1e-5 * fabs(x[i]))
            return 0;
    return 1;
}

/* The constants file: what zen_sparse_cpu_model_write prints reads back; comments and other settings
 * are skipped, missing keys keep their value, a bad number is refused. */
static void test_file_round_trip(void **state)
{
    (void)state;
    char path[] = "/tmp/zen-cpu-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    zen_cpu_model m = { 4.25, 7.5, 3.125, 1.75, 0.875, 0.0625, 0.09375, 0.40625, 0.25 };
    fprintf(f, "# comment\nZEN_OTHER=1\n");
    assert_int_equal(zen_sparse_cpu_model_write(&m, f), ZEN_OK);
    fclose(f);
    zen_cpu_model back = { 0 };
    assert_int_equal(zen_sparse_cpu_model_read(path, &back), ZEN_OK);
    assert_true(same_model(&m, &back));

    f = fopen(path, "w");
    fprintf(f, "export ZEN_SPARSE_NS_PER_HASH=9\n");
    fclose(f);
    back = m;
    assert_int_equal(zen_sparse_cpu_model_read(path, &back), ZEN_OK);
    assert_float_equal(back.hash, 9, 0);
    assert_float_equal(back.sort, m.sort, 0);

    f = fopen(path, "w");
    fprintf(f, "ZEN_SPARSE_NS_PER_SORT=fast\n");
    fclose(f);
    assert_int_equal(zen_sparse_cpu_model_read(path, &back), ZEN_ECORRUPT);
    f = fopen(path, "w"); /* any text without a constant (`--cpu /etc/passwd`) is refused */
    fprintf(f, "root:x:0:0:root:/root:/bin/bash\nZEN_OTHER=1\n");
    fclose(f);
    assert_int_equal(zen_sparse_cpu_model_read(path, &back), ZEN_ECORRUPT);
    remove(path);
    assert_int_equal(zen_sparse_cpu_model_read(path, &back), ZEN_EIO);
    assert_int_equal(zen_sparse_cpu_model_read("/dev/zero", &back),
                     ZEN_EIO); /* not a regular file */
    assert_int_equal(zen_sparse_cpu_model_read("/tmp", &back), ZEN_EIO);
}

/* A real calibration: every constant measured (positive, finite), share 1, and its file reads
 * back to the same model. No bound on the values: they are this machine's speed. */
static void test_calibrate_round_trip(void **state)
{
    (void)state;
    zen_cpu_model m;
    assert_int_equal(zen_sparse_cpu_calibrate(&m), ZEN_OK);
    const double *x = (const double *)&m;
    for (size_t i = 0; i < sizeof m / sizeof(double); i++)
        assert_true(x[i] > 0 && isfinite(x[i]));
    assert_float_equal(m.share, 1, 0);
    char path[] = "/tmp/zen-cal-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_int_equal(zen_sparse_cpu_model_write(&m, f), ZEN_OK);
    fclose(f);
    zen_cpu_model back = { 0 };
    assert_int_equal(zen_sparse_cpu_model_read(path, &back), ZEN_OK);
    remove(path);
    assert_true(same_model(&m, &back));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_constants),       cmocka_unit_test(test_index_kernels),
        cmocka_unit_test(test_byte_kernels),         cmocka_unit_test(test_hierarchical_goes_dense),
        cmocka_unit_test(test_overlap_and_share),    cmocka_unit_test(test_compute_changes_choice),
        cmocka_unit_test(test_net_model_constants),  cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_calibrate_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
