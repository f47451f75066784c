/*
 * Options structs that can grow: the init functions give the same defaults as the INIT macros,
 * the library refuses a size it does not know (a struct from another version) with ZEN_EINVAL,
 * takes a zeroed size as its own, and zen_request_destroy releases a request like the old name.
 */
#include <string.h>

#include <zen/sparse.h>
#include <zen/tp.h>

#include "testutil.h"

static void test_init_functions_match_macros(void **state)
{
    (void)state;
    zen_comm_options a = ZEN_COMM_OPTIONS_INIT, b;
    memset(&b, 0x5a, sizeof b);
    zen_comm_options_init(&b);
    assert_int_equal(b.size, sizeof b);
    assert_int_equal(b.rank, -1);
    assert_int_equal(b.world_size, -1);
    assert_true(b.transport == a.transport && b.rank == a.rank && b.master_addr == NULL &&
                b.inproc_world == NULL && b.timeout_s == a.timeout_s);

    zen_sparse_options sa = ZEN_SPARSE_OPTIONS_INIT, sb;
    memset(&sb, 0x5a, sizeof sb);
    zen_sparse_options_init(&sb);
    assert_int_equal(sb.size, sizeof sb);
    assert_true(sb.scheme == sa.scheme && sb.average == false && sb.key == NULL &&
                sb.threads == sa.threads && sb.hierarchy == ZEN_SPARSE_HIER_AUTO &&
                sb.ranks_per_host == 0);

    zen_tp_options ta = ZEN_TP_OPTIONS_INIT, tb;
    memset(&tb, 0x5a, sizeof tb);
    zen_tp_options_init(&tb);
    assert_int_equal(tb.size, sizeof tb);
    assert_true(tb.balance == ta.balance && tb.period == 0 && tb.delta == ta.delta &&
                tb.latency_s == -1.0 && tb.seed == 1);

    zen_tp_emulation ea = ZEN_TP_EMULATION_INIT, eb;
    memset(&eb, 0x5a, sizeof eb);
    zen_tp_emulation_init(&eb);
    assert_int_equal(eb.size, sizeof eb);
    assert_true(eb.mode == ea.mode && eb.mode == ZEN_TP_SLOW_SLEEP && eb.rotate == 0 &&
                eb.nslow == 0);

    zen_comm_options_init(NULL); /* ignored, not a crash */
    zen_sparse_options_init(NULL);
    zen_tp_options_init(NULL);
}

static void test_comm_rejects_unknown_size(void **state)
{
    (void)state;
    zen_inproc_world *w = NULL;
    assert_int_equal(zen_inproc_world_create(1, &w), ZEN_OK);
    zen_comm_options o;
    zen_comm_options_init(&o);
    o.transport = ZEN_TRANSPORT_INPROC;
    o.inproc_world = w;
    o.rank = 0;
    o.world_size = 1;
    zen_comm *c = NULL;
    o.size = sizeof o + 8; /* a newer header's struct */
    assert_int_equal(zen_comm_create(&o, &c), ZEN_EINVAL);
    assert_null(c);
    o.size = 0; /* zeroed: this version */
    assert_int_equal(zen_comm_create(&o, &c), ZEN_OK);
    zen_comm_destroy(c);
    zen_inproc_world_destroy(w);
}

static zen_status sparse_and_tp_sizes(zen_comm *c, void *arg)
{
    (void)arg;
    uint32_t idx[1] = { (uint32_t)zen_comm_rank(c) };
    float val[1] = { 1.0f }, out[4];
    zen_sparse_tensor t = { .rows = 4,
                            .width = 1,
                            .nnz = 1,
                            .index_type = ZEN_INDEX_U32,
                            .indices = idx,
                            .value_type = ZEN_F32,
                            .values = val };
    zen_sparse_options so;
    zen_sparse_options_init(&so);
    so.size = sizeof so - 1;
    ZT_CHECK(c, zen_sparse_allreduce_dense(c, &t, out, &so, NULL) == ZEN_EINVAL);
    ZT_CHECK(c, strstr(zen_comm_last_error(c), "size") != NULL);
    so.size = sizeof so;
    so.average = true;
    ZT_CHECK(c, zen_sparse_allreduce_dense(c, &t, out, &so, NULL) == ZEN_OK);
    for (int i = 0; i < 4; i++) /* row i held by rank i only, averaged over the ranks */
        ZT_CHECK(c, out[i] == (i < zen_comm_size(c) ? 1.0f / (float)zen_comm_size(c) : 0.0f));

    zen_tp_options to;
    zen_tp_options_init(&to);
    to.size = sizeof to * 2;
    zen_tp_group *g = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &to, &g) == ZEN_EINVAL && g == NULL);
    return ZEN_OK;
}

static void test_sparse_and_tp_reject_unknown_size(void **state)
{
    (void)state;
    zt_run_inproc(2, sparse_and_tp_sizes, NULL);
}

static zen_status request_destroy(zen_comm *c, void *arg)
{
    (void)arg;
    int peer = 1 - zen_comm_rank(c), out = zen_comm_rank(c) + 40, in = -1;
    zen_request *rq = NULL;
    ZT_CHECK(c, zen_irecv(c, &in, sizeof in, peer, 9, &rq) == ZEN_OK);
    ZT_CHECK(c, zen_send(c, &out, sizeof out, peer, 9) == ZEN_OK);
    ZT_CHECK(c, zen_request_wait(rq, -1, NULL) == ZEN_OK);
    zen_request_destroy(rq);
    ZT_CHECK(c, in == peer + 40);
    /* an unfinished receive is cancelled by either name */
    ZT_CHECK(c, zen_irecv(c, &in, sizeof in, peer, 10, &rq) == ZEN_OK);
    zen_request_destroy(rq);
    ZT_CHECK(c, zen_irecv(c, &in, sizeof in, peer, 11, &rq) == ZEN_OK);
    zen_request_destroy(rq);
    zen_request_destroy(NULL);
    return ZEN_OK;
}

static void test_request_destroy(void **state)
{
    (void)state;
    zt_run_inproc(2, request_destroy, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_functions_match_macros),
        cmocka_unit_test(test_comm_rejects_unknown_size),
        cmocka_unit_test(test_sparse_and_tp_reject_unknown_size),
        cmocka_unit_test(test_request_destroy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
