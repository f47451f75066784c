/*
 * Hierarchical sparse sync across hosts (src/sparse/scheme/hier_host.c) on 8 inproc ranks emulated as
 * 4 hosts x 2, 2 hosts x 4 and 3 hosts of 3+3+2 ranks (opts.ranks_per_host and
 * ZEN_SPARSE_RANKS_PER_HOST), against a dense sum every rank computes locally from all ranks'
 * inputs (any rank can regenerate any rank's input). Values are small integers, so every order of
 * additions gives the same floats and results must match exactly.
 *
 * Also: one plan per call asks AUTO's chooser once, per host too; AUTO stays flat (and moves the
 * same bytes as OFF) on one host and with one rank per host;
 * an AUTO decision on several hosts agrees with its own predictions; the cost model of the
 * hierarchical form on synthetic numbers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zen/sparse.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "sparse/plan/auto.h"
#include "sparse/plan/hier_cost.h"
#include "sparse/plan/predict.h"
#include "testutil.h"

#define NRANKS 8
#define ROWS   301

static const zen_sparse_scheme schemes[] = { ZEN_SPARSE_BALANCED,  ZEN_SPARSE_HIERARCHICAL,
                                             ZEN_SPARSE_ALLGATHER, ZEN_SPARSE_BLOCK,
                                             ZEN_SPARSE_PS,        ZEN_SPARSE_DENSE,
                                             ZEN_SPARSE_AUTO };
#define NSCHEMES ((int)(sizeof schemes / sizeof schemes[0]))

typedef struct input {
    size_t nnz;
    uint32_t idx[160];
    float val[160 * 8];
} input;

/* Rank r's input for case seed: ranks r % 3 == 2 have nnz 0; the others unsorted indices with
 * duplicates (every fourth entry repeats an earlier index), clustered on odd seeds so that hosts
 * overlap a lot. */
static void make_input(int r, uint32_t w, uint64_t seed, input *in)
{
    uint64_t rng = seed * 1000003u + (uint64_t)r * 7919u + 1;
    in->nnz = r % 3 == 2 ? 0 : 10 + (size_t)(zt_rand(&rng) % 150);
    uint32_t span = seed % 2 ? 40 : ROWS;
    for (size_t i = 0; i < in->nnz; i++) {
        if (i % 4 == 3)
            in->idx[i] = in->idx[zt_rand(&rng) % i];
        else
            in->idx[i] = (uint32_t)(zt_rand(&rng) % span);
        for (uint32_t k = 0; k < w; k++)
            in->val[i * w + k] = (float)((int)(zt_rand(&rng) % 9) - 4);
    }
}

static void reference(int n, uint32_t w, uint64_t seed, float *ref)
{
    memset(ref, 0, (size_t)ROWS * w * sizeof *ref);
    input in;
    for (int r = 0; r < n; r++) {
        make_input(r, w, seed, &in);
        for (size_t i = 0; i < in.nnz; i++)
            for (uint32_t k = 0; k < w; k++)
                ref[(size_t)in.idx[i] * w + k] += in.val[i * w + k];
    }
}

/* Run one call and compare with the reference; *stats gets the call's statistics. */
static zen_status one_case(zen_comm *comm, const zen_sparse_options *o, uint32_t w, uint64_t seed,
                           int dense, zen_sparse_stats *stats)
{
    int n = zen_comm_size(comm);
    input in;
    make_input(zen_comm_rank(comm), w, seed, &in);
    float *ref = zen__malloc_array((size_t)ROWS * w, sizeof *ref);
    float *out = zen__malloc_array((size_t)ROWS * w, sizeof *out);
    ZT_CHECK(comm, ref && out);
    reference(n, w, seed, ref);
    if (o->average)
        for (size_t i = 0; i < (size_t)ROWS * w; i++)
            ref[i] /= (float)n;
    zen_sparse_tensor t = { ROWS, w, in.nnz, ZEN_INDEX_U32, in.idx, ZEN_F32, in.val };
    zen_status st;
    int ok = 1;
    if (dense) {
        for (size_t i = 0; i < (size_t)ROWS * w; i++)
            out[i] = 12345.0f; /* must be overwritten whole */
        st = zen_sparse_allreduce_dense(comm, &t, out, o, stats);
        ok = st == ZEN_OK && memcmp(out, ref, (size_t)ROWS * w * sizeof *out) == 0;
    } else {
        zen_sparse_result res;
        st = zen_sparse_allreduce(comm, &t, &res, o, stats);
        if (st == ZEN_OK) {
            memset(out, 0, (size_t)ROWS * w * sizeof *out);
            for (size_t i = 0; i < res.nnz && ok; i++) {
                ok = res.indices[i] < ROWS && (i == 0 || res.indices[i] > res.indices[i - 1]);
                if (ok)
                    memcpy(out + (size_t)res.indices[i] * w, res.values + i * w, w * sizeof *out);
            }
            ok = ok && res.rows == ROWS && res.width == w &&
                 memcmp(out, ref, (size_t)ROWS * w * sizeof *out) == 0;
            zen_sparse_result_free(&res);
        }
    }
    if (st != ZEN_OK || !ok)
        fprintf(stderr, "rank %d: scheme %s w %u seed %llu dense %d rph %d: %s %s\n",
                zen_comm_rank(comm), zen_sparse_scheme_name(o->scheme), w, (unsigned long long)seed,
                dense, o->ranks_per_host, zen_status_name(st), zen_comm_last_error(comm));
    zen__free(ref);
    zen__free(out);
    ZT_CHECK(comm, st == ZEN_OK);
    ZT_CHECK(comm, ok);
    return ZEN_OK;
}

typedef struct matrix_arg {
    int rph;   /* option field; 0: from the environment */
    int hosts; /* expected host count */
} matrix_arg;

static zen_status matrix_rank(zen_comm *comm, void *argp)
{
    const matrix_arg *a = argp;
    uint64_t seed = 1;
    for (int s = 0; s < NSCHEMES; s++)
        for (uint32_t w = 1; w <= 8; w += 7)
            for (int dense = 0; dense < 2; dense++, seed++) {
                zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
                o.scheme = schemes[s];
                o.hierarchy = ZEN_SPARSE_HIER_ON;
                o.ranks_per_host = a->rph;
                o.average = seed % 5 == 0;
                zen_sparse_stats stats;
                uint64_t asked = zen__sparse_auto_consults();
                zen_status st = one_case(comm, &o, w, seed, dense, &stats);
                if (st != ZEN_OK)
                    return st;
                /* per host too, AUTO asks the chooser once (the plan picks the scheme across
                 * hosts), a fixed scheme never */
                ZT_CHECK(comm,
                         zen__sparse_auto_consults() - asked == (schemes[s] == ZEN_SPARSE_AUTO));
                ZT_CHECK(comm, stats.scheme != ZEN_SPARSE_AUTO);
                ZT_CHECK(comm, stats.hierarchical == 1);
                ZT_CHECK(comm, stats.hosts == a->hosts);
                ZT_CHECK(comm, stats.bytes_sent > 0 && stats.msgs_recv > 0);
                ZT_CHECK(comm, stats.inter_bytes_sent <= stats.bytes_sent);
                /* the first min-host-size ranks of every host talk across hosts */
                int g = a->rph ? a->rph : NRANKS / a->hosts;
                int local = zen_comm_rank(comm) % g, shards = NRANKS % g ? NRANKS % g : g;
                ZT_CHECK(comm, (stats.inter_bytes_sent > 0) == (local < shards));
                /* the ranks that synced across hosts ran the requested scheme */
                if (schemes[s] != ZEN_SPARSE_AUTO && stats.scheme != ZEN_SPARSE_AUTO)
                    ZT_CHECK(comm, stats.scheme == schemes[s]);
            }
    return ZEN_OK;
}

static void test_4_hosts_x_2(void **state)
{
    (void)state;
    matrix_arg a = { 2, 4 };
    zt_run_inproc(NRANKS, matrix_rank, &a);
}

static void test_2_hosts_x_4(void **state)
{
    (void)state;
    matrix_arg a = { 4, 2 };
    zt_run_inproc(NRANKS, matrix_rank, &a);
}

static void test_uneven_hosts(void **state)
{
    (void)state;
    matrix_arg a = { 3, 3 }; /* 3 + 3 + 2: the third rank of the big hosts idles across hosts */
    zt_run_inproc(NRANKS, matrix_rank, &a);
}

static void test_hosts_from_env(void **state)
{
    (void)state;
    setenv("ZEN_SPARSE_RANKS_PER_HOST", "4", 1);
    matrix_arg a = { 0, 2 };
    zt_run_inproc(NRANKS, matrix_rank, &a);
    unsetenv("ZEN_SPARSE_RANKS_PER_HOST");
}

/* One communicator, groupings changing from call to call: the cached sub-communicators are split
 * again for each new grouping, and ON also works with one host and with one rank per host. */
static zen_status regroup_rank(zen_comm *comm, void *argp)
{
    (void)argp;
    static const int rphs[] = { 2, 3, 2, 8, 1, 4 };
    static const int hosts[] = { 4, 3, 4, 1, 8, 2 };
    for (int i = 0; i < 6; i++) {
        zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
        o.scheme = ZEN_SPARSE_BALANCED;
        o.hierarchy = ZEN_SPARSE_HIER_ON;
        o.ranks_per_host = rphs[i];
        zen_sparse_stats stats;
        zen_status st = one_case(comm, &o, 8, 100 + (uint64_t)i, i % 2, &stats);
        if (st != ZEN_OK)
            return st;
        ZT_CHECK(comm, stats.hierarchical == 1 && stats.hosts == hosts[i]);
    }
    return ZEN_OK;
}

static void test_regroup(void **state)
{
    (void)state;
    zt_run_inproc(NRANKS, regroup_rank, NULL);
}

/* AUTO on one host (the inproc default) and with one rank per host: flat, the same scheme and
 * the same bytes as OFF. */
static zen_status flat_rank(zen_comm *comm, void *argp)
{
    (void)argp;
    static const int rphs[] = { 0, NRANKS, 1 };
    for (int i = 0; i < 3; i++) {
        for (int s = 0; s < NSCHEMES; s++) {
            zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
            o.scheme = schemes[s];
            o.ranks_per_host = rphs[i];
            zen_sparse_stats a, b;
            uint64_t asked = zen__sparse_auto_consults();
            zen_status st = one_case(comm, &o, 8, 200 + (uint64_t)s, 1, &a);
            if (st != ZEN_OK)
                return st;
            /* one plan per call: AUTO's chooser is asked once, a fixed scheme never asks */
            ZT_CHECK(comm, zen__sparse_auto_consults() - asked == (schemes[s] == ZEN_SPARSE_AUTO));
            o.hierarchy = ZEN_SPARSE_HIER_OFF;
            if ((st = one_case(comm, &o, 8, 200 + (uint64_t)s, 1, &b)) != ZEN_OK)
                return st;
            ZT_CHECK(comm, a.hierarchical == 0 && b.hierarchical == 0);
            ZT_CHECK(comm, a.scheme == b.scheme && a.bytes_sent == b.bytes_sent);
            ZT_CHECK(comm, a.msgs_sent == b.msgs_sent);
            ZT_CHECK(comm, a.predicted_hier_s == 0);
        }
    }
    return ZEN_OK;
}

static void test_auto_flat_on_one_host(void **state)
{
    (void)state;
    zt_run_inproc(NRANKS, flat_rank, NULL);
}

/* AUTO on 4 hosts x 2: the call is correct either way, and the form taken agrees with the
 * predictions the statistics report. */
static zen_status auto_rank(zen_comm *comm, void *argp)
{
    int *took = argp;
    for (int s = 0; s < NSCHEMES; s++) {
        zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
        o.scheme = schemes[s];
        o.ranks_per_host = 2;
        zen_sparse_stats st_;
        uint64_t asked = zen__sparse_auto_consults();
        zen_status st = one_case(comm, &o, 8, 301 + (uint64_t)s, s % 2, &st_);
        if (st != ZEN_OK)
            return st;
        /* one plan per call: the chooser's profile is asked once and decides the form and,
         * per host, the scheme across hosts (from the predicted density of a host's sum) */
        ZT_CHECK(comm, zen__sparse_auto_consults() - asked == 1);
        ZT_CHECK(comm, st_.hosts == 4 && st_.predicted_hier_s > 0);
        zen_sparse_scheme flat = schemes[s];
        if (flat == ZEN_SPARSE_AUTO) /* the flat choice is the cheapest flat prediction */
            flat = zen__sparse_cheapest(st_.predicted_s);
        ZT_CHECK(comm, st_.hierarchical == (st_.predicted_hier_s < st_.predicted_s[flat]));
        if (zen_comm_rank(comm) == 0)
            took[st_.hierarchical]++;
    }
    return ZEN_OK;
}

static void test_auto_multi_host(void **state)
{
    (void)state;
    int took[2] = { 0, 0 };
    zt_run_inproc(NRANKS, auto_rank, took);
    /* a fast host and a slow network: the hierarchical form must pay for some scheme */
    setenv("ZEN_NET_GBPS", "0.01", 1);
    setenv("ZEN_NET_LAT_US", "1", 1);
    setenv("ZEN_NET_INTRA_GBPS", "10000", 1);
    setenv("ZEN_NET_INTRA_LAT_US", "0.1", 1);
    int took_fast[2] = { 0, 0 };
    zt_run_inproc(NRANKS, auto_rank, took_fast);
    unsetenv("ZEN_NET_GBPS");
    unsetenv("ZEN_NET_LAT_US");
    unsetenv("ZEN_NET_INTRA_GBPS");
    unsetenv("ZEN_NET_INTRA_LAT_US");
    assert_true(took_fast[1] > 0);
}

/* ---- the cost model on synthetic numbers ---- */

static void test_cost_rules(void **state)
{
    (void)state;
    zen_hier_shape one_host = { 8, 1, 8, 8, 1000, 1, 0 };
    zen_hier_shape one_per_host = { 8, 8, 1, 1, 1000, 1, 0 };
    zen_hier_shape two_by_four = { 8, 2, 4, 4, 1000, 1, 0 };
    assert_int_equal(zen__sparse_hier_pays(&one_host, 1.0, 1e-9), 0);
    assert_int_equal(zen__sparse_hier_pays(&one_per_host, 1.0, 1e-9), 0);
    assert_int_equal(zen__sparse_hier_pays(&two_by_four, 1.0, 0.5), 1);
    assert_int_equal(zen__sparse_hier_pays(&two_by_four, 1.0, 1.0), 0);

    zen_sparse_profile p;
    zen__sparse_profile_model(&p, 64, 0.001, ZEN_OVERLAP_RANDOM);
    p.levels = 0;
    assert_true(fabs(zen__hier_gamma_at(&p, 64, 1) - 1) < 1e-12);
    assert_true(fabs(zen__hier_gamma_at(&p, 64, 64) - p.gamma_n) < 1e-12);
    double prev = 1;
    for (int k = 2; k <= 64; k++) {
        double g = zen__hier_gamma_at(&p, 64, k);
        assert_true(g >= prev && g <= p.gamma_n + 1e-12);
        prev = g;
    }
    zen__sparse_profile_model(&p, 64, 0.001, ZEN_OVERLAP_RANDOM); /* measured levels are used */
    assert_true(fabs(zen__hier_gamma_at(&p, 64, 8) - p.gamma[3]) < 1e-12);
}

/* With an infinitely fast host, the hierarchical form costs the inter-host sync of one shard:
 * H ranks, rows / S rows, density d * gamma^(n/H), plus the inner agreement's latency. */
static void test_cost_composition(void **state)
{
    (void)state;
    zen_net_model inter = { .bytes_per_s = 1.25e9, .latency_s = 20e-6 };
    zen_net_model intra = { .bytes_per_s = 1e30, .latency_s = 0 };
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, 32, 0.01, ZEN_OVERLAP_IDENTICAL); /* gamma = 1 everywhere */
    zen_hier_shape sh = { 32, 4, 8, 8, 1 << 20, 4, 1 };
    zen_sparse_scheme used = ZEN_SPARSE_AUTO;
    double t = zen__sparse_predict_hier(&sh, &p, &inter, &intra, 256, ZEN_SPARSE_BALANCED, &used);
    assert_int_equal(used, ZEN_SPARSE_BALANCED);
    zen_sparse_profile q;
    zen__sparse_profile_model(&q, 4, 0.01, ZEN_OVERLAP_IDENTICAL);
    double pred[ZEN_SPARSE_SCHEME_COUNT];
    zen__sparse_predict(4, (1 << 20) / 8, 4, &q, &inter, 256, pred);
    double expect = pred[ZEN_SPARSE_BALANCED] + 3 * inter.latency_s;
    assert_true(fabs(t - expect) <= 1e-9 * expect);

    /* AUTO across hosts takes the cheapest inter prediction */
    t = zen__sparse_predict_hier(&sh, &p, &inter, &intra, 256, ZEN_SPARSE_AUTO, &used);
    assert_int_equal(used, zen__sparse_cheapest(pred));
    assert_true(fabs(t - (pred[used] + 3 * inter.latency_s)) <= 1e-9 * t);
}

/* Who wins: identical rows on all ranks (intra sums do not densify) pay off hierarchically at
 * 8 ranks per host; a tiny density on a huge tensor does not (the host reduce-scatter is dense). */
static void test_cost_decisions(void **state)
{
    (void)state;
    zen_net_model inter = { .bytes_per_s = 1.25e9, .latency_s = 20e-6 }, intra;
    setenv("ZEN_NET_INTRA_GBPS", "0", 1);
    setenv("ZEN_NET_INTRA_LAT_US", "0", 1);
    zen__net_model_intra(&inter, &intra);
    assert_true(fabs(intra.bytes_per_s - 10 * inter.bytes_per_s) < 1);
    assert_true(fabs(intra.latency_s - inter.latency_s / 5) < 1e-15);

    double flat[ZEN_SPARSE_SCHEME_COUNT];
    zen_sparse_profile p;
    zen__sparse_profile_model(&p, 64, 0.05, ZEN_OVERLAP_IDENTICAL);
    zen_hier_shape sh = { 64, 8, 8, 8, 1 << 18, 16, 1 };
    zen__sparse_predict(64, sh.rows, sh.width, &p, &inter, 256, flat);
    double h = zen__sparse_predict_hier(&sh, &p, &inter, &intra, 256, ZEN_SPARSE_BALANCED, NULL);
    assert_true(zen__sparse_hier_pays(&sh, flat[ZEN_SPARSE_BALANCED], h));

    zen__sparse_profile_model(&p, 64, 1e-6, ZEN_OVERLAP_DISJOINT);
    zen_hier_shape big = { 64, 8, 8, 8, (uint64_t)1 << 30, 1, 1 };
    zen__sparse_predict(64, big.rows, big.width, &p, &inter, 256, flat);
    h = zen__sparse_predict_hier(&big, &p, &inter, &intra, 256, ZEN_SPARSE_BALANCED, NULL);
    assert_false(zen__sparse_hier_pays(&big, flat[ZEN_SPARSE_BALANCED], h));

    setenv("ZEN_NET_INTRA_GBPS", "800", 1);
    zen__net_model_intra(&inter, &intra);
    assert_true(fabs(intra.bytes_per_s - 1e11) < 1);
    unsetenv("ZEN_NET_INTRA_GBPS");
    unsetenv("ZEN_NET_INTRA_LAT_US");
}

/* Bad hierarchy options are refused on every rank with EINVAL and the communicator stays usable. */
static zen_status bad_option_rank(zen_comm *comm, void *argp)
{
    (void)argp;
    input in;
    make_input(zen_comm_rank(comm), 1, 7, &in);
    zen_sparse_tensor t = { ROWS, 1, in.nnz, ZEN_INDEX_U32, in.idx, ZEN_F32, in.val };
    zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
    o.hierarchy = 7;
    float out[ROWS];
    ZT_CHECK(comm, zen_sparse_allreduce_dense(comm, &t, out, &o, NULL) == ZEN_EINVAL);
    o.hierarchy = ZEN_SPARSE_HIER_ON;
    o.ranks_per_host = zen_comm_rank(comm) == 3 ? 4 : 2; /* ranks disagree on the grouping */
    ZT_CHECK(comm, zen_sparse_allreduce_dense(comm, &t, out, &o, NULL) == ZEN_EMISMATCH);
    o.ranks_per_host = 2;
    zen_sparse_stats stats;
    return one_case(comm, &o, 1, 7, 1, &stats);
}

static void test_bad_options(void **state)
{
    (void)state;
    zt_run_inproc(NRANKS, bad_option_rank, NULL);
}

/* ---- launcher grouping over tcp: forked processes with ZEN_LOCAL_RANK / ZEN_LOCAL_SIZE ---- */

typedef struct launcher_arg {
    int hosts; /* expected */
    int lie;   /* added to every ZEN_LOCAL_SIZE: an inconsistent launcher */
} launcher_arg;

static zen_status launcher_rank(zen_comm *comm, void *argp)
{
    const launcher_arg *a = argp;
    for (int s = 0; s < NSCHEMES; s++) {
        for (int hier = ZEN_SPARSE_HIER_AUTO; hier <= ZEN_SPARSE_HIER_ON; hier++) {
            zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
            o.scheme = schemes[s];
            o.hierarchy = hier;
            zen_sparse_stats stats;
            zen_status st = one_case(comm, &o, 4, 400 + (uint64_t)s, (s + hier) % 2, &stats);
            if (st != ZEN_OK)
                return st;
            zen_sparse_scheme flat = schemes[s] == ZEN_SPARSE_AUTO
                                         ? zen__sparse_cheapest(stats.predicted_s)
                                         : schemes[s];
            int expect = hier == ZEN_SPARSE_HIER_ON ||
                         (hier == ZEN_SPARSE_HIER_AUTO && stats.predicted_hier_s > 0 &&
                          stats.predicted_hier_s < stats.predicted_s[flat]);
            ZT_CHECK(comm, stats.hierarchical == expect);
            ZT_CHECK(comm, hier != ZEN_SPARSE_HIER_AUTO || (stats.predicted_hier_s > 0) == !a->lie);
            ZT_CHECK(comm, hier == ZEN_SPARSE_HIER_OFF || stats.hosts == a->hosts);
        }
    }
    return ZEN_OK;
}

/* Hosts of consecutive ranks: rank r gets ZEN_LOCAL_RANK/ZEN_LOCAL_SIZE of its host. */
typedef struct host_layout {
    const int *host_size;
    int lie;
} host_layout;

static void set_local_env(int rank, void *ctx)
{
    const host_layout *h = ctx;
    int first = 0, host = 0;
    while (rank >= first + h->host_size[host])
        first += h->host_size[host++];
    char v[32];
    snprintf(v, sizeof v, "%d", rank - first);
    setenv("ZEN_LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", h->host_size[host] + h->lie);
    setenv("ZEN_LOCAL_SIZE", v, 1);
}

static void run_tcp(int n, const int *host_size, launcher_arg *arg)
{
    host_layout h = { host_size, arg->lie };
    zt_run_tcp_forked(n, set_local_env, &h, launcher_rank, arg, 120);
}

static void test_launcher_grouping_tcp(void **state)
{
    (void)state;
    static const int two_by_two[] = { 2, 2 }, uneven[] = { 3, 2 };
    launcher_arg a = { 2, 0 };
    run_tcp(4, two_by_two, &a);
    run_tcp(5, uneven, &a);
    launcher_arg bad = { 4, 1 };         /* local sizes 3 for hosts of 2: every rank its own host */
    setenv("ZEN_LOG_LEVEL", "error", 1); /* the expected warning */
    run_tcp(4, two_by_two, &bad);
}

int main(void)
{
    setenv("ZEN_LOG_LEVEL", "error", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_4_hosts_x_2),      cmocka_unit_test(test_2_hosts_x_4),
        cmocka_unit_test(test_uneven_hosts),     cmocka_unit_test(test_hosts_from_env),
        cmocka_unit_test(test_regroup),          cmocka_unit_test(test_auto_flat_on_one_host),
        cmocka_unit_test(test_auto_multi_host),  cmocka_unit_test(test_cost_rules),
        cmocka_unit_test(test_cost_composition), cmocka_unit_test(test_cost_decisions),
        cmocka_unit_test(test_bad_options),      cmocka_unit_test(test_launcher_grouping_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
