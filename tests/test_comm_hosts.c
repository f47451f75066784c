/*
 * The host grouping of a communicator (src/coll/topology.c, zen__comm_hosts) against the layout
 * the test itself gave the ranks:
 *  - mixed transport, hosts named by ZEN_HOST_ID in a non-contiguous layout: the grouping is the
 *    transport's host table, renumbered by lowest rank, also on a split sub-communicator;
 *  - tcp with the launcher's ZEN_LOCAL_RANK/ZEN_LOCAL_SIZE: the launcher's grouping;
 *  - inproc: one host; ranks_per_host: consecutive emulated hosts;
 *  - the hierarchical sparse sync runs on the communicator's grouping (stats.hosts) and its result
 *    equals a dense allreduce of the same inputs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/sparse.h>

#include "coll/comm_internal.h"
#include "testutil.h"

#define MAXR 8

/* host of rank r in the layout of a case, by lowest rank (what the communicator must report) */
typedef struct layout {
    int n;
    int host[MAXR];
    int hosts;
} layout;

static void set_host_id(int rank, void *ctx)
{
    const layout *l = ctx;
    char id[32];
    /* names in reverse order of first appearance, so the transport's own numbering need not
     * match the expected one */
    snprintf(id, sizeof id, "zt-h%d", 9 - l->host[rank]);
    setenv("ZEN_HOST_ID", id, 1);
}

static void set_local_env(int rank, void *ctx)
{
    const layout *l = ctx;
    int local = 0, size = 0;
    for (int q = 0; q < l->n; q++) {
        local += q < rank && l->host[q] == l->host[rank];
        size += l->host[q] == l->host[rank];
    }
    char v[16];
    snprintf(v, sizeof v, "%d", local);
    setenv("ZEN_LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", size);
    setenv("ZEN_LOCAL_SIZE", v, 1);
}

/* The grouping of comm must be `expect` (over comm's ranks): numbering, counts, local index. */
static zen_status check_grouping(zen_comm *comm, const int *expect)
{
    zen_comm_hosts h;
    ZT_CHECK(comm, zen__comm_hosts(comm, 0, &h) == ZEN_OK);
    int n = zen_comm_size(comm), me = zen_comm_rank(comm), hosts = 0, local = 0;
    int count[MAXR] = { 0 };
    for (int r = 0; r < n; r++) {
        ZT_CHECK(comm, h.host_of[r] == expect[r]);
        hosts = expect[r] + 1 > hosts ? expect[r] + 1 : hosts;
        count[expect[r]]++;
        local += r < me && expect[r] == expect[me];
    }
    int lo = n, hi = 0;
    for (int k = 0; k < hosts; k++) {
        lo = count[k] < lo ? count[k] : lo;
        hi = count[k] > hi ? count[k] : hi;
    }
    ZT_CHECK(comm, h.hosts == hosts && h.host == expect[me] && h.local == local);
    ZT_CHECK(comm, h.min_local == lo && h.max_local == hi);
    uint64_t sig = h.sig;
    ZT_CHECK(comm, zen__comm_hosts(comm, 0, &h) == ZEN_OK && h.sig == sig); /* cached */
    return ZEN_OK;
}

/* Rows 0..ROWS-1, rank r holds rows r, r+3, r+6, ... with value r+1 + row (small integers, so
 * every order of additions gives the same floats). */
#define ROWS  40
#define WIDTH 3

static zen_status hier_matches_dense(zen_comm *comm, int hosts)
{
    int me = zen_comm_rank(comm);
    uint32_t idx[ROWS];
    float val[ROWS * WIDTH], dense[ROWS * WIDTH], out[ROWS * WIDTH];
    size_t nnz = 0;
    memset(dense, 0, sizeof dense);
    for (uint32_t row = (uint32_t)me; row < ROWS; row += 3, nnz++) {
        idx[nnz] = row;
        for (int k = 0; k < WIDTH; k++)
            val[nnz * WIDTH + k] = dense[row * WIDTH + k] = (float)(me + 1 + (int)row + k);
    }
    ZT_CHECK(comm, zen_allreduce(comm, dense, dense, ROWS * WIDTH, ZEN_F32, ZEN_SUM) == ZEN_OK);
    zen_sparse_tensor t = { ROWS, WIDTH, nnz, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
    o.scheme = ZEN_SPARSE_BALANCED;
    o.hierarchy = ZEN_SPARSE_HIER_ON;
    zen_sparse_stats st;
    ZT_CHECK(comm, zen_sparse_allreduce_dense(comm, &t, out, &o, &st) == ZEN_OK);
    ZT_CHECK(comm, st.hierarchical == 1 && st.hosts == hosts);
    ZT_CHECK(comm, memcmp(out, dense, sizeof out) == 0);
    return ZEN_OK;
}

static zen_status mixed_rank(zen_comm *comm, void *argp)
{
    const layout *l = argp;
    zen_status st = check_grouping(comm, l->host);
    if (st != ZEN_OK)
        return st;
    /* a split keeps the hosts of its members: ranks of even world rank */
    int me = zen_comm_rank(comm);
    zen_comm *sub = NULL;
    ZT_CHECK(comm, zen_comm_split(comm, me % 2, me, &sub) == ZEN_OK);
    int expect[MAXR], m = 0, renum[MAXR];
    for (int k = 0; k < MAXR; k++)
        renum[k] = -1;
    int next = 0;
    for (int r = me % 2; r < l->n; r += 2, m++) {
        if (renum[l->host[r]] < 0)
            renum[l->host[r]] = next++;
        expect[m] = renum[l->host[r]];
    }
    st = check_grouping(sub, expect);
    zen_comm_destroy(sub);
    if (st != ZEN_OK)
        return st;
    return hier_matches_dense(comm, l->hosts);
}

static void test_mixed_transport_hosts(void **state)
{
    (void)state;
    layout l = { 5, { 0, 1, 0, 1, 1 }, 2 };
    zt_run_forked(ZEN_TRANSPORT_MIXED, l.n, set_host_id, &l, mixed_rank, &l, 120);
}

static zen_status launcher_rank(zen_comm *comm, void *argp)
{
    const layout *l = argp;
    zen_status st = check_grouping(comm, l->host);
    return st != ZEN_OK ? st : hier_matches_dense(comm, l->hosts);
}

static void test_launcher_hosts(void **state)
{
    (void)state;
    layout l = { 5, { 0, 0, 0, 1, 1 }, 2 };
    zt_run_tcp_forked(l.n, set_local_env, &l, launcher_rank, &l, 120);
}

static zen_status inproc_rank(zen_comm *comm, void *argp)
{
    (void)argp;
    int one[MAXR] = { 0 };
    zen_status st = check_grouping(comm, one);
    if (st != ZEN_OK)
        return st;
    zen_comm_hosts h;
    ZT_CHECK(comm, zen__comm_hosts(comm, 3, &h) == ZEN_OK); /* 8 ranks: 3 + 3 + 2 */
    int me = zen_comm_rank(comm);
    ZT_CHECK(comm, h.hosts == 3 && h.host == me / 3 && h.local == me % 3);
    ZT_CHECK(comm, h.min_local == 2 && h.max_local == 3);
    ZT_CHECK(comm, zen__comm_hosts(comm, -1, &h) == ZEN_EINVAL);
    return ZEN_OK;
}

static void test_inproc_hosts(void **state)
{
    (void)state;
    zt_run_inproc(8, inproc_rank, NULL);
}

int main(void)
{
    setenv("ZEN_LOG_LEVEL", "error", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inproc_hosts),
        cmocka_unit_test(test_mixed_transport_hosts),
        cmocka_unit_test(test_launcher_hosts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
