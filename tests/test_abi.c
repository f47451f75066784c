/*
 * The public structs' sizes, recorded: a change to any of them breaks the ABI of libzen.so (a
 * program built against the old header passes the old size), so it must be a deliberate, noted
 * change with a new struct version, never the side effect of another change.
 *
 * In particular, adding a sparse scheme (ZEN_SPARSE_SCHEME_COUNT grows) must NOT change any
 * size here: zen_sparse_stats.predicted_s has the fixed capacity ZEN_SPARSE_STATS_SCHEMES. If
 * this test fails after adding a scheme, a public struct is sized by the scheme count again.
 *
 * The numbers are for LP64 (x86_64, aarch64 Linux); elsewhere the test only checks the
 * capacity rules. Options structs also carry their size in .size, which the library checks.
 */
#include <stddef.h>

#include <zen/comm.h>
#include <zen/compress.h>
#include <zen/simulate.h>
#include <zen/sparse.h>
#include <zen/store.h>
#include <zen/tp.h>
#include <zen/zen.h>

#include "testutil.h"

/* compile-time: the library-side capacity holds every scheme, and is what sizes the array */
_Static_assert(ZEN_SPARSE_SCHEME_COUNT <= ZEN_SPARSE_STATS_SCHEMES,
               "more schemes than zen_sparse_stats.predicted_s holds");
_Static_assert(sizeof(((zen_sparse_stats *)0)->predicted_s) ==
                   ZEN_SPARSE_STATS_SCHEMES * sizeof(double),
               "zen_sparse_stats.predicted_s is sized by ZEN_SPARSE_STATS_SCHEMES");

typedef struct recorded {
    const char *name;
    size_t size, want;
} recorded;

#define REC(T, n)        \
    {                    \
#T, sizeof(T), n \
    }

static void test_struct_sizes(void **state)
{
    (void)state;
#if defined(__LP64__) && defined(__linux__)
    const recorded r[] = {
        /* zen.h, comm.h, store.h */
        REC(zen_param_info, 56),
        REC(zen_comm_options, 56),
        REC(zen_comm_stats, 72),
        REC(zen_arrival, 32),
        REC(zen_store, 24),
        /* sparse.h */
        REC(zen_sparse_tensor, 56),
        REC(zen_sparse_result, 40),
        REC(zen_sparse_options, 72), /* 56 before global_topk, 64 before any_order (both still
                                        accepted in .size) */
        REC(zen_sparse_stats, 336),
        REC(zen_trace_tensor, 296),
        REC(zen_trace_step, 32),
        /* tp.h */
        REC(zen_tp_options, 80),
        REC(zen_tp_slow, 16),
        REC(zen_tp_emulation, 1048),
        REC(zen_tp_param, 32),
        REC(zen_tp_stats, 112),
        /* simulate.h (documented as free to change between minor versions, but on purpose) */
        REC(zen_sparsity_profile, 288),
        REC(zen_index_sets, 40),
        REC(zen_cpu_model, 72),
        /* compress.h */
        REC(zen_topk_options, 32),
        REC(zen_topk_buffers, 64),
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if (r[i].size != r[i].want) {
            print_error("sizeof(%s) = %zu, recorded %zu\n", r[i].name, r[i].size, r[i].want);
            bad++;
        }
    assert_int_equal(bad, 0);
    /* the fields after the per-scheme array keep their place too */
    assert_int_equal(offsetof(zen_sparse_stats, predicted_count), 256);
    assert_int_equal(offsetof(zen_sparse_stats, density), 264);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_struct_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
