/*
 * Tunables are parsed strictly with bounds: a malformed or out-of-range ZEN_* value is ignored
 * (the default is used, `zen info` shows "ignored" and why), and a timeout of "inf" means no
 * deadline without overflowing the ns conversion (test_tcp: 32 MiB messages under
 * ZEN_TIMEOUT_S=inf).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/zen.h>

#include "common/clock.h"
#include "common/tunables.h"
#include "testutil.h"

static zen_param_info info_of(const char *full_name)
{
    zen_param_info p;
    memset(&p, 0, sizeof p);
    for (size_t i = 0; i < zen_param_count(); i++) {
        assert_int_equal(zen_param_get(i, &p), ZEN_OK);
        if (strcmp(p.name, full_name) == 0)
            return p;
    }
    fail_msg("%s is not in the tunables table", full_name);
    return p;
}

static void test_bad_values_are_ignored(void **state)
{
    (void)state;

    static const struct {
        const char *name, *value;
    } bad[] = { { "TIMEOUT_S", "abc" },       { "TIMEOUT_S", "-1" },
                { "TIMEOUT_S", "0" },         { "TIMEOUT_S", "5s" },
                { "TIMEOUT_S", "nan" },       { "RING_CHUNK_BYTES", "0" },
                { "RING_CHUNK_BYTES", "-8" }, { "RING_CHUNK_BYTES", "99999999999999999999" },
                { "ALLREDUCE_ALGO", "fast" }, { "SEED", "-5" },
                { "SPARSE_BLOCK_SIZE", "0" }, { "NET_GBPS", "inf" },
                { "ALLOC_CACHE_MB", "1e3" },  { "SPARSE_PARTITION", "" } };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char full[64];
        snprintf(full, sizeof full, "ZEN_%s", bad[i].name);
        setenv(full, bad[i].value, 1);
        zen_param_info p = info_of(full);
        const char *dflt = p.default_value;
        assert_string_equal(zen__param_str(bad[i].name), dflt);
        if (*bad[i].value) {
            assert_string_equal(p.source, "ignored");
            assert_non_null(p.problem);
            assert_string_equal(p.raw_value, bad[i].value);
            assert_string_equal(p.value, dflt);
        } else {
            assert_string_equal(p.source, "default"); /* empty = unset */
        }
        unsetenv(full);
    }
    assert_true(zen__param_timeout("TIMEOUT_S") == 300.0);
}

static void test_good_values_are_taken(void **state)
{
    (void)state;
    setenv("ZEN_RING_CHUNK_BYTES", "1024", 1);
    assert_int_equal(zen__param_long("RING_CHUNK_BYTES"), 1024);
    assert_string_equal(info_of("ZEN_RING_CHUNK_BYTES").source, "env");
    unsetenv("ZEN_RING_CHUNK_BYTES");
    setenv("ZEN_ALLREDUCE_ALGO", "RING", 1);
    assert_string_equal(zen__param_str("ALLREDUCE_ALGO"), "RING");
    unsetenv("ZEN_ALLREDUCE_ALGO");
    setenv("ZEN_TIMEOUT_S", "2.5", 1);
    assert_true(zen__param_timeout("TIMEOUT_S") == 2.5);
    setenv("ZEN_TIMEOUT_S", "inf", 1);
    assert_true(isinf(zen__param_timeout("TIMEOUT_S")));
    setenv("ZEN_TIMEOUT_S", "9.3e9", 1); /* past 2^63 ns: no deadline, not an overflow */
    assert_true(isinf(zen__param_timeout("TIMEOUT_S")));
    assert_string_equal(info_of("ZEN_TIMEOUT_S").source, "env");
    unsetenv("ZEN_TIMEOUT_S");
}

/* Every tunable accepts its own default when a user writes it out (a bounds table that falls
 * behind a changed default would call the documented value "ignored"). */
static void test_defaults_pass_their_checks(void **state)
{
    (void)state;
    for (size_t i = 0; i < zen_param_count(); i++) {
        zen_param_info p;
        assert_int_equal(zen_param_get(i, &p), ZEN_OK);
        if (!p.default_value || !*p.default_value || strcmp(p.source, "default") != 0)
            continue; /* no default to write out, or the environment of the run sets it */
        char name[96], value[256];
        snprintf(name, sizeof name, "%s", p.name);
        snprintf(value, sizeof value, "%s", p.default_value);
        setenv(name, value, 1);
        zen_param_info q = info_of(name);
        if (strcmp(q.source, "env") != 0)
            fail_msg("%s=%s (its default) is %s: %s", name, value, q.source,
                     q.problem ? q.problem : "?");
        unsetenv(name);
    }
}

static void test_ns_conversion_saturates(void **state)
{
    (void)state;
    assert_true(zen_ns_from_s(INFINITY) == INT64_MAX);
    assert_true(zen_ns_from_s(9.3e9) == INT64_MAX);
    assert_true(zen_ns_from_s(NAN) == INT64_MAX);
    assert_true(zen_ns_from_s(1.5) == 1500000000);
    assert_true(zen_ns_from_s(-3) == 0);
    assert_true(zen_deadline_after(INFINITY) == INT64_MAX);
    assert_true(zen_ns_add_sat(INT64_MAX - 5, 10) == INT64_MAX);
    assert_true(zen_ns_add_sat(5, 10) == 15);
    int64_t d = zen_deadline_after(1.0);
    assert_true(d > zen_now_ns() && d < zen_now_ns() + 2000000000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_values_are_ignored),
        cmocka_unit_test(test_good_values_are_taken),
        cmocka_unit_test(test_defaults_pass_their_checks),
        cmocka_unit_test(test_ns_conversion_saturates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
