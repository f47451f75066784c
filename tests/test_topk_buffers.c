/*
 * zen_topk_compress_buffers: DGC's step on caller-owned residual and velocity arrays, with ranges
 * sent whole (what the PyTorch hook runs per bucket).
 *
 * Two references, over four steps each, compared bit for bit (count, indices, values, v, u):
 *  - zen_topk_compress on a state fed the same gradients (no ranges): the state's call must be
 *    the same step;
 *  - the step written plainly here: a separate update loop, the selection (EXACT: every non-zero
 *    entry sorted by magnitude bits descending, index ascending, the first k; APPROX: the set is
 *    defined by the sampled threshold, so zen_topk_select on the updated v gives it), then a mask
 *    over all n entries (selected, in a range) read in index order to emit and clear.
 * Sizes with a ragged tail, k = 0 .. k > n, momentum off/on, 1 and 3 threads, both modes, ranges
 * at the ends and adjacent, data whose equal magnitudes end in the radix fallback; every bad
 * argument leaves the arrays as they were. Output arrays are sized to the documented capacity
 * exactly, with a canary past it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zen/compress.h>

#include "testutil.h"

#define CANARY 12345.0f

typedef struct step_case {
    size_t n, k;
    float m;
    int velocity; /* pass a velocity array (with m = 0 too) */
    zen_topk_mode mode;
    int threads;
    int ties;     /* gradients of +-1 only */
    int ranges;   /* 0: none; 1: the set of ranges_for() */
    int vs_state; /* also run zen_topk_compress on a state alongside */
} step_case;

/* [0,5) [5,40) adjacent, one in the middle, one at the end */
static size_t ranges_for(size_t n, uint32_t *out)
{
    uint32_t r[8] = {
        0, 5, 5, 40, (uint32_t)(n / 2), (uint32_t)(n / 2 + 70), (uint32_t)(n - 33), (uint32_t)n
    };
    memcpy(out, r, sizeof r);
    return 4;
}

static uint32_t key_of(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b & 0x7fffffffu;
}

static const float *sort_v;

static int by_magnitude(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint32_t ki = key_of(sort_v[i]), kj = key_of(sort_v[j]);
    if (ki != kj)
        return ki > kj ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* The selection of the plain step, as a mask: sel[i] = 1 for the selected entries. */
static void plain_select(const step_case *sc, const float *v, const zen_topk_options *o,
                         unsigned char *sel)
{
    size_t n = sc->n, cap = zen_topk_capacity(sc->k) < n ? zen_topk_capacity(sc->k) : n;
    memset(sel, 0, n);
    if (sc->mode == ZEN_TOPK_APPROX) {
        uint32_t *idx = malloc((cap + 1) * sizeof *idx);
        float *val = malloc((cap + 1) * sizeof *val);
        size_t got = 0;
        assert_int_equal(zen_topk_select(v, ZEN_F32, n, sc->k, o, idx, val, cap, &got), ZEN_OK);
        for (size_t i = 0; i < got; i++)
            sel[idx[i]] = 1;
        free(idx), free(val);
        return;
    }
    uint32_t *order = malloc((n + 1) * sizeof *order);
    size_t nz = 0;
    for (size_t i = 0; i < n; i++)
        if (key_of(v[i]) != 0)
            order[nz++] = (uint32_t)i;
    sort_v = v;
    qsort(order, nz, sizeof *order, by_magnitude);
    for (size_t i = 0; i < nz && i < sc->k; i++)
        sel[order[i]] = 1;
    free(order);
}

/* One plain step on (v, u); writes the expected pairs to ri/rv, returns their count. */
static size_t plain_step(const step_case *sc, const float *g, float *v, float *u,
                         const uint32_t *ranges, size_t nranges, const zen_topk_options *o,
                         unsigned char *sel, uint32_t *ri, float *rv)
{
    size_t n = sc->n, w = 0;
    for (size_t i = 0; i < n; i++) {
        if (sc->velocity) {
            u[i] = sc->m * u[i] + g[i];
            v[i] += u[i];
        } else {
            v[i] += g[i];
        }
    }
    plain_select(sc, v, o, sel);
    for (size_t r = 0; r < nranges; r++)
        for (uint32_t e = ranges[2 * r]; e < ranges[2 * r + 1]; e++)
            sel[e] = 2; /* whole: sent, velocity kept */
    for (size_t i = 0; i < n; i++) {
        if (!sel[i])
            continue;
        ri[w] = (uint32_t)i;
        rv[w++] = v[i];
        v[i] = 0.0f;
        if (sel[i] == 1 && sc->velocity)
            u[i] = 0.0f;
    }
    return w;
}

typedef struct arrays {
    float *g, *v, *u, *rv_ref, *val, *sval; /* v, u: under test; rv_ref: the plain step's values */
    float *pv, *pu;                         /* the plain step's v and u */
    uint32_t *idx, *ri, *sidx;
    unsigned char *sel;
    size_t cap;
} arrays;

static void alloc_arrays(arrays *a, size_t n, size_t cap)
{
    a->cap = cap;
    a->g = malloc(n * sizeof(float));
    a->v = calloc(n, sizeof(float)), a->u = calloc(n, sizeof(float));
    a->pv = calloc(n, sizeof(float)), a->pu = calloc(n, sizeof(float));
    a->val = malloc((cap + 1) * sizeof(float)), a->rv_ref = malloc((n + 1) * sizeof(float));
    a->sval = malloc((cap + 1) * sizeof(float));
    a->idx = malloc((cap + 1) * sizeof(uint32_t)), a->ri = malloc((n + 1) * sizeof(uint32_t));
    a->sidx = malloc((cap + 1) * sizeof(uint32_t));
    a->sel = malloc(n);
    assert_true(a->g && a->v && a->u && a->pv && a->pu && a->val && a->rv_ref && a->sval &&
                a->idx && a->ri && a->sidx && a->sel);
}

static void free_arrays(arrays *a)
{
    free(a->g), free(a->v), free(a->u), free(a->pv), free(a->pu), free(a->val), free(a->rv_ref);
    free(a->sval), free(a->idx), free(a->ri), free(a->sidx), free(a->sel);
}

/* zen_topk_compress on state s (no ranges) must give what the buffers call gave */
static void check_state(const step_case *sc, zen_topk_state *s, arrays *a,
                        const zen_topk_options *o, size_t got)
{
    size_t sgot = 0, n = sc->n;
    assert_int_equal(zen_topk_compress(s, a->g, sc->k, o, a->sidx, a->sval, a->cap, &sgot), ZEN_OK);
    assert_int_equal(sgot, got);
    if (got > 0) {
        assert_memory_equal(a->sidx, a->idx, got * sizeof(uint32_t));
        assert_memory_equal(a->sval, a->val, got * sizeof(float));
    }
    assert_memory_equal(zen_topk_state_residual(s), a->v, n * sizeof(float));
    if (sc->m != 0)
        assert_memory_equal(zen_topk_state_velocity(s), a->u, n * sizeof(float));
}

static void run_case(const step_case *sc)
{
    size_t n = sc->n;
    uint32_t ranges[8];
    size_t nr = sc->ranges ? ranges_for(n, ranges) : 0, whole = 0;
    for (size_t r = 0; r < nr; r++)
        whole += ranges[2 * r + 1] - ranges[2 * r];
    size_t want = sc->mode == ZEN_TOPK_EXACT ? sc->k : zen_topk_capacity(sc->k);
    arrays a;
    alloc_arrays(&a, n, (want < n ? want : n) + whole);
    zen_topk_state *s = NULL;
    if (sc->vs_state)
        assert_int_equal(zen_topk_state_create(n, sc->m, &s), ZEN_OK);
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    o.mode = sc->mode;
    o.threads = sc->threads;
    zen_topk_buffers b = { .size = sizeof b,
                           .n = n,
                           .grad = a.g,
                           .residual = a.v,
                           .velocity = sc->velocity ? a.u : NULL,
                           .momentum = sc->m,
                           .whole = nr ? ranges : NULL,
                           .nwhole = nr };
    for (int step = 0; step < 4; step++) {
        o.seed = (uint64_t)step;
        zt_fill_grad(a.g, n, sc->ties, 11 + (uint64_t)step * 1000 + n);
        size_t want_n = plain_step(sc, a.g, a.pv, a.pu, ranges, nr, &o, a.sel, a.ri, a.rv_ref);
        a.idx[a.cap] = 7;
        a.val[a.cap] = CANARY;
        size_t got = 0;
        assert_int_equal(zen_topk_compress_buffers(&b, sc->k, &o, a.idx, a.val, a.cap, &got),
                         ZEN_OK);
        assert_int_equal(a.idx[a.cap], 7); /* nothing written past the documented capacity */
        assert_true(a.val[a.cap] == CANARY);
        assert_int_equal(got, want_n);
        if (got > 0) {
            assert_memory_equal(a.idx, a.ri, got * sizeof(uint32_t));
            assert_memory_equal(a.val, a.rv_ref, got * sizeof(float));
        }
        assert_memory_equal(a.v, a.pv, n * sizeof(float));
        if (sc->velocity)
            assert_memory_equal(a.u, a.pu, n * sizeof(float));
        if (s)
            check_state(sc, s, &a, &o, got);
    }
    zen_topk_state_destroy(s);
    free_arrays(&a);
}

static void test_matches_plain_and_state(void **state)
{
    (void)state;
    static const size_t ns[] = { 300007, 1000 };
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) {
        size_t n = ns[a];
        size_t ks[] = { 0, 1, n / 100, n, n + 5 };
        for (size_t b = 0; b < sizeof ks / sizeof *ks; b++)
            for (int mom = 0; mom < 2; mom++)
                for (int mode = 0; mode < 2; mode++)
                    for (int threads = 1; threads <= 3; threads += 2)
                        for (int ranges = 0; ranges < 2; ranges++) {
                            step_case sc = { .n = n,
                                             .k = ks[b],
                                             .m = mom ? 0.9f : 0.0f,
                                             .velocity = mom,
                                             .mode = (zen_topk_mode)mode,
                                             .threads = threads,
                                             .ranges = ranges,
                                             .vs_state = !ranges };
                            run_case(&sc);
                        }
    }
}

static void test_ties_and_zero_momentum(void **state)
{
    (void)state;
    /* every |v| equal: the first pass overflows, the radix fallback decides (lower index wins) */
    for (int mode = 0; mode < 2; mode++)
        for (int ranges = 0; ranges < 2; ranges++) {
            step_case ties = { .n = 300007,
                               .k = 1000,
                               .m = 0.5f,
                               .velocity = 1,
                               .mode = (zen_topk_mode)mode,
                               .threads = 3,
                               .ties = 1,
                               .ranges = ranges,
                               .vs_state = !ranges };
            run_case(&ties);
            /* a velocity with momentum 0: u = g every step, v += u */
            step_case zero = { .n = 5000,
                               .k = 50,
                               .velocity = 1,
                               .mode = (zen_topk_mode)mode,
                               .threads = 1,
                               .ranges = ranges };
            run_case(&zero);
        }
}

/* every bad argument: its status, *count 0, and v and u as they were */
static void expect_refused(const zen_topk_buffers *b, size_t k, const zen_topk_options *o,
                           uint32_t *idx, float *val, size_t cap, zen_status want)
{
    size_t n = b->n < 64 ? b->n : 64;
    float v0[64], u0[64];
    memcpy(v0, b->residual, n * sizeof(float));
    memcpy(u0, b->velocity, n * sizeof(float));
    size_t count = 99;
    assert_int_equal(zen_topk_compress_buffers(b, k, o, idx, val, cap, &count), want);
    assert_int_equal(count, 0);
    assert_memory_equal(b->residual, v0, n * sizeof(float));
    assert_memory_equal(b->velocity, u0, n * sizeof(float));
}

static void test_errors(void **state)
{
    (void)state;
    float g[64], v[64], u[64], val[64];
    uint32_t idx[64];
    for (int i = 0; i < 64; i++)
        g[i] = (float)(i - 30), v[i] = 0.5f * (float)i, u[i] = 1.0f;
    uint32_t ok[4] = { 0, 4, 60, 64 };
    zen_topk_buffers good = { .size = sizeof good,
                              .n = 64,
                              .grad = g,
                              .residual = v,
                              .velocity = u,
                              .momentum = 0.5f,
                              .whole = ok,
                              .nwhole = 2 };
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    size_t cap = zen_topk_capacity(4) + 8;
    zen_topk_buffers b = good;
    expect_refused(&b, 4, &o, idx, val, cap - 1, ZEN_EINVAL); /* one short */
    static const uint32_t bad[][4] = {
        { 0, 4, 3, 8 },   /* overlapping */
        { 4, 4, 10, 12 }, /* empty */
        { 10, 12, 0, 4 }, /* descending */
        { 0, 4, 60, 65 }, /* past n */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        b.whole = bad[i];
        expect_refused(&b, 4, &o, idx, val, 64, ZEN_EINVAL);
    }
    b = good, b.whole = NULL;
    expect_refused(&b, 4, &o, idx, val, 64, ZEN_EINVAL);
    b = good, b.momentum = 1.0f;
    expect_refused(&b, 4, &o, idx, val, 64, ZEN_EINVAL);
    b = good, b.momentum = NAN;
    expect_refused(&b, 4, &o, idx, val, 64, ZEN_EINVAL);
    b = good, b.size = sizeof b + 8;
    expect_refused(&b, 4, &o, idx, val, 64, ZEN_EINVAL);
    b = good, b.grad = NULL;
    expect_refused(&b, 4, &o, idx, val, 64, ZEN_EINVAL);
    b = good;
    expect_refused(&b, 0, &o, NULL, val, 64, ZEN_EINVAL); /* the ranges need output too */
    o.mode = (zen_topk_mode)7;
    expect_refused(&b, 4, &o, idx, val, 64, ZEN_EINVAL);
    o = (zen_topk_options)ZEN_TOPK_OPTIONS_INIT;
    b = good, b.n = (size_t)1 << 32, b.nwhole = 0;
    size_t count = 99;
    assert_int_equal(zen_topk_compress_buffers(&b, 4, &o, idx, val, 64, &count), ZEN_EUNSUPPORTED);
    assert_int_equal(count, 0);
    assert_int_equal(zen_topk_compress_buffers(NULL, 4, &o, idx, val, 64, &count), ZEN_EINVAL);
    assert_int_equal(zen_topk_compress_buffers(&good, 4, &o, idx, val, 64, NULL), ZEN_EINVAL);
    /* momentum without a velocity array is refused; momentum 0 without one is plain feedback */
    b = good, b.velocity = NULL;
    float v0[64];
    memcpy(v0, v, sizeof v);
    assert_int_equal(zen_topk_compress_buffers(&b, 4, &o, idx, val, 64, &count), ZEN_EINVAL);
    assert_memory_equal(v, v0, sizeof v);
    b.momentum = 0.0f;
    assert_int_equal(zen_topk_compress_buffers(&b, 0, &o, idx, val, 8, &count), ZEN_OK);
    assert_int_equal(count, 8); /* k = 0: the ranges only, [0, 4) and [60, 64), all of v += g */
    for (size_t i = 0; i < 8; i++) {
        uint32_t e = i < 4 ? (uint32_t)i : (uint32_t)(56 + i);
        assert_int_equal(idx[i], e);
        assert_true(val[i] == v0[e] + g[e]);
        assert_true(v[e] == 0.0f);
    }
    assert_true(v[30] == v0[30] + g[30]); /* accumulated, not sent */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_plain_and_state),
        cmocka_unit_test(test_ties_and_zero_momentum),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
