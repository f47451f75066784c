/*
 * The baseline sparse schemes (HIERARCHICAL, ALLGATHER, BLOCK, PS, DENSE; BALANCED and AUTO ride
 * along) through the public API, against a dense sum every rank computes locally from all ranks'
 * inputs (each rank can regenerate any rank's input from its seed). Values are small integers, so
 * every summation order gives the exact same floats and results must match bit for bit.
 *
 * Matrix: ranks {1,2,3,5,8,16} x nnz {0 on some ranks, 0 everywhere, 1, many} x width {1, 8} x
 * indices {sorted unique, unsorted unique, unsorted with duplicates} x output {dense, COO}.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/sparse.h>

#include "common/alloc.h"
#include "sparse/wire/xchg.h"
#include "testutil.h"

/* Every value of zen_sparse_scheme, AUTO last: a scheme added to the enum (and its registry
 * row) is run here without touching this test. */
#define NSCHEMES ((size_t)ZEN_SPARSE_SCHEME_COUNT)

static zen_sparse_scheme scheme_at(size_t i)
{
    return i + 1 < NSCHEMES ? (zen_sparse_scheme)(i + 1) : ZEN_SPARSE_AUTO;
}

enum {
    NNZ_SOME_ZERO,
    NNZ_ALL_ZERO,
    NNZ_ONE,
    NNZ_MANY,
    NNZ_MODES
};

enum {
    IDX_SORTED,
    IDX_UNSORTED,
    IDX_DUPLICATED,
    IDX_MODES
};

#define ROWS 700

static int expect_failures; /* the out-of-memory test: failed cases are expected, not reported */

/* BALANCED's ablation switches for the cases run (test_ablations; zero: defaults). */
static int abl_probes, abl_format;
static double abl_r1;

typedef struct input {
    size_t nnz;
    uint32_t *idx;
    float *val;
} input;

/* Input of rank r for one case; deterministic in (case, r), so every rank can rebuild it. */
static void make_input(int r, int nnz_mode, int idx_mode, uint32_t w, uint64_t case_seed, input *in)
{
    uint64_t rng = case_seed * 1000003u + (uint64_t)r * 7919u + 1;
    size_t nnz = 0;
    switch (nnz_mode) {
    case NNZ_SOME_ZERO:
        nnz = r % 2 == 0 ? 0 : 3 + (size_t)(zt_rand(&rng) % 20);
        break;
    case NNZ_ALL_ZERO:
        nnz = 0;
        break;
    case NNZ_ONE:
        nnz = 1;
        break;
    default:
        nnz = ROWS / 3 + (size_t)(zt_rand(&rng) % (ROWS / 3));
        break;
    }
    in->nnz = nnz;
    in->idx = malloc((nnz + 1) * sizeof *in->idx);
    in->val = malloc((nnz * w + 1) * sizeof *in->val);
    if (idx_mode == IDX_DUPLICATED) {
        for (size_t i = 0; i < nnz; i++)
            in->idx[i] = (uint32_t)(zt_rand(&rng) % (ROWS / 4)); /* many repeats */
    } else {
        /* unique: a random subset, taken in ascending order */
        size_t k = 0;
        for (uint32_t x = 0; x < ROWS && k < nnz; x++)
            if (zt_rand(&rng) % (uint64_t)(ROWS - x) < nnz - k)
                in->idx[k++] = x;
        if (idx_mode == IDX_UNSORTED)
            for (size_t i = nnz; i > 1; i--) {
                size_t j = (size_t)(zt_rand(&rng) % i);
                uint32_t t = in->idx[i - 1];
                in->idx[i - 1] = in->idx[j];
                in->idx[j] = t;
            }
    }
    for (size_t i = 0; i < nnz * w; i++)
        in->val[i] = (float)((int)(zt_rand(&rng) % 9) - 4);
}

static void free_input(input *in)
{
    free(in->idx);
    free(in->val);
}

/* Dense sum of all ranks' inputs. */
static float *reference(int n, int nnz_mode, int idx_mode, uint32_t w, uint64_t case_seed)
{
    float *ref = calloc((size_t)ROWS * w, sizeof *ref);
    for (int r = 0; r < n; r++) {
        input in;
        make_input(r, nnz_mode, idx_mode, w, case_seed, &in);
        for (size_t i = 0; i < in.nnz; i++)
            for (uint32_t c = 0; c < w; c++)
                ref[(size_t)in.idx[i] * w + c] += in.val[i * w + c];
        free_input(&in);
    }
    return ref;
}

/* Run one case through both entry points and compare with the reference. */
static zen_status one_case(zen_comm *comm, zen_sparse_scheme scheme, int nnz_mode, int idx_mode,
                           uint32_t w, int average, uint64_t case_seed)
{
    int n = zen_comm_size(comm);
    input in;
    make_input(zen_comm_rank(comm), nnz_mode, idx_mode, w, case_seed, &in);
    float *ref = reference(n, nnz_mode, idx_mode, w, case_seed);
    if (average)
        for (size_t i = 0; i < (size_t)ROWS * w; i++)
            ref[i] /= (float)n;
    zen_sparse_tensor t = { ROWS, w, in.nnz, ZEN_INDEX_U32, in.idx, ZEN_F32, in.val };
    zen_sparse_options opts = ZEN_SPARSE_OPTIONS_INIT;
    opts.scheme = scheme;
    opts.average = average;
    opts.key = scheme == ZEN_SPARSE_AUTO ? "test-tensor" : NULL;
    opts.hash_probes = abl_probes;
    opts.hash_r1 = abl_r1;
    opts.pull_format = abl_format;
    zen_sparse_stats stats;
    float *out = malloc((size_t)ROWS * w * sizeof *out);
    for (size_t i = 0; i < (size_t)ROWS * w; i++)
        out[i] = 12345.0f; /* must be overwritten everywhere */
    zen_status st = zen_sparse_allreduce_dense(comm, &t, out, &opts, &stats);
    int ok = st == ZEN_OK && memcmp(out, ref, (size_t)ROWS * w * sizeof *out) == 0;
    int scheme_ok = scheme == ZEN_SPARSE_AUTO || stats.scheme == scheme;

    zen_sparse_result res = { 0 };
    zen_status st2 = ok ? zen_sparse_allreduce(comm, &t, &res, &opts, NULL) : ZEN_OK;
    int ok2 = 1;
    if (ok && st2 == ZEN_OK) {
        memset(out, 0, (size_t)ROWS * w * sizeof *out);
        for (size_t i = 0; i < res.nnz && ok2; i++) {
            ok2 = res.indices[i] < ROWS && (i == 0 || res.indices[i] > res.indices[i - 1]);
            if (ok2)
                memcpy(out + (size_t)res.indices[i] * w, res.values + i * w, w * sizeof(float));
        }
        ok2 = ok2 && res.rows == ROWS && res.width == w &&
              memcmp(out, ref, (size_t)ROWS * w * sizeof *out) == 0;
    }
    zen_sparse_result_free(&res);
    free(out);
    free(ref);
    free_input(&in);
    if (!ok || !ok2 || !scheme_ok || st2 != ZEN_OK) {
        if (expect_failures && (st != ZEN_OK || st2 != ZEN_OK))
            return st != ZEN_OK ? st : st2;
        fprintf(stderr,
                "rank %d/%d: scheme %s nnz_mode %d idx_mode %d width %u average %d: "
                "dense %s (%s) coo %s (%s) scheme-used %s\n",
                zen_comm_rank(comm), n, zen_sparse_scheme_name(scheme), nnz_mode, idx_mode, w,
                average, ok ? "ok" : "WRONG", zen_status_name(st), ok2 ? "ok" : "WRONG",
                zen_status_name(st2), zen_sparse_scheme_name(stats.scheme));
        return st != ZEN_OK ? st : (st2 != ZEN_OK ? st2 : ZEN_EINTERNAL);
    }
    return ZEN_OK;
}

static zen_status matrix_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    uint64_t case_seed = 1;
    for (size_t s = 0; s < NSCHEMES; s++)
        for (int nm = 0; nm < NNZ_MODES; nm++)
            for (int im = 0; im < IDX_MODES; im++)
                for (uint32_t w = 1; w <= 8; w += 7) {
                    zen_status st = one_case(comm, scheme_at(s), nm, im, w, 0, case_seed++);
                    if (st != ZEN_OK)
                        return st;
                }
    /* average: divides the sum by n on every path (dense written by the scheme or emitted) */
    for (size_t s = 0; s < NSCHEMES; s++) {
        zen_status st = one_case(comm, scheme_at(s), NNZ_MANY, IDX_DUPLICATED, 8, 1, case_seed++);
        if (st != ZEN_OK)
            return st;
    }
    return ZEN_OK;
}

static void test_ranks_1(void **state)
{
    (void)state;
    zt_run_inproc(1, matrix_rank, NULL);
}

static void test_ranks_2(void **state)
{
    (void)state;
    zt_run_inproc(2, matrix_rank, NULL);
}

static void test_ranks_3(void **state)
{
    (void)state;
    zt_run_inproc(3, matrix_rank, NULL);
}

static void test_ranks_5(void **state)
{
    (void)state;
    zt_run_inproc(5, matrix_rank, NULL);
}

static void test_ranks_8(void **state)
{
    (void)state;
    zt_run_inproc(8, matrix_rank, NULL);
}

static void test_ranks_16(void **state)
{
    (void)state;
    zt_run_inproc(16, matrix_rank, NULL);
}

/* BALANCED (and AUTO) over every pull and partition path: the ring pull (Bruck off), Bruck for
 * every size, the counting partition and Algorithm 1, at even and odd rank counts. */
static zen_status balanced_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    zen_status st = ZEN_OK;
    uint64_t seed = 900;
    for (int nm = 0; nm < NNZ_MODES && st == ZEN_OK; nm++)
        for (int im = 0; im < IDX_MODES && st == ZEN_OK; im++)
            for (uint32_t w = 1; w <= 8 && st == ZEN_OK; w += 7)
                st = one_case(comm, ZEN_SPARSE_BALANCED, nm, im, w, nm == NNZ_MANY, seed++);
    return st;
}

static void test_balanced_paths(void **state)
{
    (void)state;
    const char *pulls[] = { "0", "4294967296" }, *parts[] = { "hash", "count" };
    const int ranks[] = { 4, 6, 7 };
    for (size_t p = 0; p < 2; p++)
        for (size_t q = 0; q < 2; q++) {
            setenv("ZEN_SPARSE_PULL_BRUCK_MAX_BYTES", pulls[p], 1);
            setenv("ZEN_SPARSE_PARTITION", parts[q], 1);
            for (size_t r = 0; r < 3; r++)
                zt_run_inproc(ranks[r], balanced_rank, NULL);
        }
    unsetenv("ZEN_SPARSE_PULL_BRUCK_MAX_BYTES");
    unsetenv("ZEN_SPARSE_PARTITION");
}

/* The paper's ablations (ZEN Fig. 16/17) still give the exact sum: k = 1..3 probes, r1 from
 * half to 4x the items (more serial memory, re-passes), and every pull format. */
static void test_ablations(void **state)
{
    (void)state;
    const double r1s[] = { 0.5, 1, 4 };
    for (int k = 1; k <= 3; k++)
        for (int r = 0; r < 3; r++) {
            abl_probes = k;
            abl_r1 = r1s[r];
            zt_run_inproc(5, balanced_rank, NULL);
        }
    abl_probes = 0;
    abl_r1 = 0;
    const int formats[] = { ZEN_SPARSE_PULL_HASH_BITMAP, ZEN_SPARSE_PULL_COO,
                            ZEN_SPARSE_PULL_PLAIN_BITMAP };
    for (int f = 0; f < 3; f++) {
        abl_format = formats[f];
        zt_run_inproc(4, balanced_rank, NULL);
        zt_run_inproc(7, balanced_rank, NULL);
    }
    abl_format = 0;
}

/* Block boundaries: a block size that does not divide rows, ranges that split mid-block, and a
 * single-row block (ZEN_SPARSE_BLOCK_SIZE below the width). */
static zen_status block_sizes_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    zen_status st = ZEN_OK;
    for (uint64_t seed = 500; seed < 503 && st == ZEN_OK; seed++)
        for (uint32_t w = 1; w <= 8 && st == ZEN_OK; w += 7)
            st = one_case(comm, ZEN_SPARSE_BLOCK, NNZ_MANY, IDX_UNSORTED, w, 0, seed);
    return st;
}

static void test_block_sizes(void **state)
{
    (void)state;
    const char *sizes[] = { "7", "1", "4096" };
    for (size_t i = 0; i < 3; i++) {
        setenv("ZEN_SPARSE_BLOCK_SIZE", sizes[i], 1);
        zt_run_inproc(5, block_sizes_rank, NULL);
    }
    unsetenv("ZEN_SPARSE_BLOCK_SIZE");
}

/* Received COO blocks are checked before use: size, order, range (no assert on wire data). */
static zen_status wire_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    uint32_t buf[12];
    float *vals = (float *)(void *)(buf + 3);
    zen_coo view;
    buf[0] = 1;
    buf[1] = 5;
    buf[2] = 9;
    vals[0] = vals[1] = vals[2] = 1.0f;
    ZT_CHECK(comm, zen__coo_view(comm, 0, (uint8_t *)buf, 24, 10, 1, 0, 10, &view) == ZEN_OK);
    ZT_CHECK(comm, view.nnz == 3 && view.idx[2] == 9 && view.val[0] == 1.0f);
    /* not a whole number of entries */
    ZT_CHECK(comm, zen__coo_view(comm, 0, (uint8_t *)buf, 23, 10, 1, 0, 10, &view) == ZEN_EPROTO);
    /* index outside the rows, or outside the owner's range */
    ZT_CHECK(comm, zen__coo_view(comm, 0, (uint8_t *)buf, 24, 9, 1, 0, 9, &view) == ZEN_EPROTO);
    ZT_CHECK(comm, zen__coo_view(comm, 0, (uint8_t *)buf, 24, 10, 1, 2, 10, &view) == ZEN_EPROTO);
    /* unsorted or duplicated */
    buf[1] = 1;
    ZT_CHECK(comm, zen__coo_view(comm, 0, (uint8_t *)buf, 24, 10, 1, 0, 10, &view) == ZEN_EPROTO);
    buf[1] = 0;
    ZT_CHECK(comm, zen__coo_view(comm, 0, (uint8_t *)buf, 24, 10, 1, 0, 10, &view) == ZEN_EPROTO);
    return ZEN_OK;
}

static void test_wire_checks(void **state)
{
    (void)state;
    zt_run_inproc(1, wire_rank, NULL);
}

/* Allocation failures anywhere in a scheme end the call with an error on every rank (no hang,
 * no leak under ASan), and a fresh communicator works again afterwards. */
typedef struct oom_arg {
    zen_sparse_scheme scheme;
} oom_arg;

static zen_status oom_rank(zen_comm *comm, void *argp)
{
    const oom_arg *arg = argp;
    return one_case(comm, arg->scheme, NNZ_MANY, IDX_DUPLICATED, 8, 0, 77);
}

static void quiet(zen_log_level level, const char *subsys, const char *line, void *user)
{
    (void)level;
    (void)subsys;
    (void)line;
    (void)user;
}

static void test_out_of_memory(void **state)
{
    (void)state;
    zen_log_set_sink(quiet, NULL); /* the injected failures are logged by every rank */
    expect_failures = 1;
    static const zen_sparse_scheme mine[] = { ZEN_SPARSE_HIERARCHICAL, ZEN_SPARSE_ALLGATHER,
                                              ZEN_SPARSE_BLOCK,        ZEN_SPARSE_PS,
                                              ZEN_SPARSE_DENSE,        ZEN_SPARSE_AUTO };
    for (size_t s = 0; s < sizeof mine / sizeof mine[0]; s++) {
        oom_arg a = { mine[s] };
        for (int n = 1; n <= 3; n += 2) {
            int failures = 0;
            for (long k = 1; k < 400; k += 3) {
                zen_status status[3];
                zen__alloc_fail_after(k);
                zen_status st = zen_run_inproc(n, NULL, oom_rank, &a, status);
                zen__alloc_fail_after(0);
                /* a wrong result is never acceptable, only a failed call */
                for (int r = 0; r < n && st != ZEN_OK; r++)
                    assert_int_not_equal(status[r], ZEN_EINTERNAL);
                if (st == ZEN_OK)
                    break; /* k is past the last allocation of the call */
                failures++;
            }
            assert_true(failures > 0);
            expect_failures = 0;
            zt_run_inproc(n, oom_rank, &a); /* and everything works again */
            expect_failures = 1;
        }
    }
    expect_failures = 0;
    zen_log_set_sink(NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_1),       cmocka_unit_test(test_ranks_2),
        cmocka_unit_test(test_ranks_3),       cmocka_unit_test(test_ranks_5),
        cmocka_unit_test(test_ranks_8),       cmocka_unit_test(test_ranks_16),
        cmocka_unit_test(test_block_sizes),   cmocka_unit_test(test_wire_checks),
        cmocka_unit_test(test_out_of_memory), cmocka_unit_test(test_balanced_paths),
        cmocka_unit_test(test_ablations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
