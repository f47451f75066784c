/*
 * Tunables are parsed strictly with bounds: a malformed or out-of-range ZEN_* value is ignored
 * (the default is used, `zen info` shows "ignored" and why), a malformed strict one (identity,
 * address, secret) is "refused", and a timeout of "inf" means no deadline without overflowing the
 * ns conversion (test_tcp: 32 MiB messages under ZEN_TIMEOUT_S=inf).
 *
 * test_every_tunable_rejects_garbage enumerates the whole table through the public API and feeds
 * every variable the same hostile values; which of them are genuinely valid is listed here, from
 * the documented meanings, not taken from the table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/sparse.h>
#include <zen/zen.h>

#include "common/clock.h"
#include "common/tunables.h"
#include "common/tunables_table.h"
#include "testutil.h"

static const char *const hostile[] = {
    "garbage", "nan", "inf", "-1", "1e30", "", "99999999999999999999999", "9223372036854775808",
};

/* The (variable, value) pairs among the hostile ones that mean something. */
static const struct {
    const char *name, *value;
} valid[] = {
    /* a timeout of inf (or any value from 1e9 s on) is "no deadline" / "heartbeat off" */
    { "ZEN_TIMEOUT_S", "inf" },
    { "ZEN_TIMEOUT_S", "1e30" },
    { "ZEN_TIMEOUT_S", "99999999999999999999999" },
    { "ZEN_TIMEOUT_S", "9223372036854775808" },
    { "ZEN_HEARTBEAT_S", "inf" },
    { "ZEN_HEARTBEAT_S", "1e30" },
    { "ZEN_HEARTBEAT_S", "99999999999999999999999" },
    { "ZEN_HEARTBEAT_S", "9223372036854775808" },
    { "ZEN_WAIT_REPORT_S", "inf" }, /* never report */
    { "ZEN_WAIT_REPORT_S", "1e30" },
    { "ZEN_WAIT_REPORT_S", "99999999999999999999999" },
    { "ZEN_WAIT_REPORT_S", "9223372036854775808" },
    /* -1 is documented: "the default behaviour" */
    { "ZEN_SHM_SPIN_US", "-1" },
    { "ZEN_SHM_SPIN_YIELD", "-1" },
    { "ZEN_SHM_PREFAULT", "-1" },
    { "ZEN_SHM_CMA", "-1" },
    /* a 64-bit seed: 2^63 is one */
    { "ZEN_SEED", "9223372036854775808" },
    /* host names (resolved, and refused if unknown, when the rendezvous uses them) */
    { "ZEN_MASTER_ADDR", "garbage" },
    { "ZEN_MASTER_ADDR", "nan" },
    { "ZEN_MASTER_ADDR", "inf" },
    { "ZEN_MASTER_ADDR", "1e30" },
    { "ZEN_SOCKET_IFADDR", "garbage" },
    { "ZEN_SOCKET_IFADDR", "nan" },
    { "ZEN_SOCKET_IFADDR", "inf" },
    { "ZEN_SOCKET_IFADDR", "1e30" },
    /* free-form: any printable token names a host, any bytes are a secret, any path a file */
    { "ZEN_HOST_ID", "*" },
    { "ZEN_JOB_SECRET", "*" },
    { "ZEN_JOB_SECRET_FILE", "*" },
};

static int is_valid(const char *name, const char *value)
{
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        if (strcmp(valid[i].name, name) == 0 &&
            (strcmp(valid[i].value, "*") == 0 || strcmp(valid[i].value, value) == 0))
            return 1;
    return 0;
}

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

/* Public API only: every variable, every hostile value is either taken as it is (and listed as
 * valid above) or shown as ignored / refused with a reason, the default in effect. */
static void test_every_tunable_rejects_garbage(void **state)
{
    (void)state;
    assert_true(zen_param_count() > 60);
    for (size_t i = 0; i < zen_param_count(); i++) {
        zen_param_info p;
        assert_int_equal(zen_param_get(i, &p), ZEN_OK);
        char name[96], saved[256];
        snprintf(name, sizeof name, "%s", p.name);
        int was_set = getenv(name) != NULL; /* ctest sets ZEN_TIMEOUT_S: put it back after */
        snprintf(saved, sizeof saved, "%s", was_set ? getenv(name) : "");
        for (size_t k = 0; k < sizeof hostile / sizeof hostile[0]; k++) {
            const char *v = hostile[k];
            setenv(name, v, 1);
            assert_int_equal(zen_param_get(i, &p), ZEN_OK);
            unsetenv(name);
            if (!*v) { /* empty is unset */
                if (strcmp(p.source, "default") != 0 || p.problem)
                    fail_msg("%s='' is %s, not default", name, p.source);
                continue;
            }
            if (is_valid(name, v)) {
                if (strcmp(p.source, "env") != 0 || p.problem)
                    fail_msg("%s='%s' (valid) is %s: %s", name, v, p.source,
                             p.problem ? p.problem : "");
                continue;
            }
            int refused = strcmp(p.source, "refused") == 0;
            if ((strcmp(p.source, "ignored") != 0 && !refused) || !p.problem || !*p.problem)
                fail_msg("%s='%s' is taken as %s ('%s'), not ignored with a reason", name, v,
                         p.source, p.value);
            assert_string_equal(p.value, p.default_value);
            assert_non_null(p.raw_value);
            if (strcmp(name, "ZEN_JOB_SECRET") != 0)
                assert_string_equal(p.raw_value, v);
        }
        if (was_set)
            setenv(name, saved, 1);
    }
}

/* The getter of a row's kind, with the hostile value set, gives a value within the row's bounds:
 * the value itself where it is valid, else the default. */
static void check_getter(const zen_param_row *r, const char *v, int valid_value)
{
    const char *short_name = r->name + 4;
    switch (r->kind) {
    case PK_LONG:
        if (r->flags & PF_STRICT) {
            const char *got = NULL;
            char why[300] = "";
            int st = zen__param_strict(short_name, &got, why, sizeof why);
            assert_int_equal(st, valid_value ? 1 : *v ? -1 : 0);
            if (st < 0)
                assert_non_null(strstr(why, r->name));
        } else {
            long x = zen__param_long(short_name);
            assert_true(x >= r->lo && x <= r->hi);
            assert_true(x ==
                        (valid_value ? strtol(v, NULL, 10) : strtol(r->default_value, NULL, 10)));
        }
        break;
    case PK_DOUBLE: {
        double x = zen__param_double(short_name);
        assert_true(isfinite(x) && x >= r->lo && x <= r->hi);
        assert_true(x == strtod(valid_value ? v : r->default_value, NULL));
        break;
    }
    case PK_TIMEOUT: {
        double s = zen__param_timeout(short_name);
        assert_true(s > 0);
        if (valid_value)
            assert_true(isinf(s)); /* all the valid hostile timeouts mean "none" */
        else
            assert_true(s == strtod(r->default_value, NULL));
        break;
    }
    case PK_U64: {
        uint64_t u = 0;
        assert_int_equal(zen__param_u64(short_name, &u), valid_value); /* the default: unset */
        if (valid_value)
            assert_true(u == strtoull(v, NULL, 10));
        break;
    }
    case PK_CHOICE:
    case PK_LIST:
    case PK_FACTORS:
    case PK_STRING:
        if (r->flags & PF_STRICT) {
            const char *got = NULL;
            char why[300] = "";
            int st = zen__param_strict(short_name, &got, why, sizeof why);
            assert_int_equal(st, valid_value ? 1 : *v ? -1 : 0);
            if (valid_value)
                assert_string_equal(got, v);
            if (st < 0 && (r->flags & PF_SECRET))
                assert_null(strstr(why, v)); /* a secret is never quoted */
        } else {
            const char *got = zen__param_str(short_name);
            char why[160];
            /* a row may leave the meaning to its reader: ZEN_TRANSPORT takes any word here and
             * the communicator checks it against the transports (test_transport_registry) */
            if (valid_value || (*v && !zen__param_problem(r, v, why, sizeof why)))
                assert_string_equal(got, v);
            else if (r->kind != PK_CHOICE) /* a choice comes back in its table spelling */
                assert_string_equal(got, r->default_value);
        }
        break;
    }
}

static void test_getters_stay_in_bounds(void **state)
{
    (void)state;
    setenv("ZEN_LOG_LEVEL", "error", 1); /* the expected warnings */
    for (size_t i = 0; i < zen__param_rows(); i++) {
        const zen_param_row *r = zen__param_row_at(i);
        assert_ptr_equal(zen__param_row(r->name + 4), r);
        if (strcmp(r->name, "ZEN_LOG_LEVEL") == 0)
            continue; /* read once per process: covered by the enumeration above */
        char saved[256];
        int was_set = getenv(r->name) != NULL;
        snprintf(saved, sizeof saved, "%s", was_set ? getenv(r->name) : "");
        for (size_t k = 0; k < sizeof hostile / sizeof hostile[0]; k++) {
            setenv(r->name, hostile[k], 1);
            check_getter(r, hostile[k], *hostile[k] && is_valid(r->name, hostile[k]));
            unsetenv(r->name);
        }
        if (was_set)
            setenv(r->name, saved, 1);
    }
    unsetenv("ZEN_LOG_LEVEL");
}

/* Every row has a kind with what it needs: bounds that hold the default, words, a validator. */
static void test_rows_are_typed(void **state)
{
    (void)state;
    for (size_t i = 0; i < zen__param_rows(); i++) {
        const zen_param_row *r = zen__param_row_at(i);
        assert_true(strncmp(r->name, "ZEN_", 4) == 0 && r->description && *r->description);
        assert_true(r->kind >= PK_LONG && r->kind <= PK_STRING);
        if (r->kind == PK_CHOICE || r->kind == PK_LIST || r->kind == PK_FACTORS)
            assert_non_null(r->words);
        if (r->kind == PK_STRING)
            assert_non_null(r->check);
        if ((r->kind == PK_LONG || r->kind == PK_DOUBLE) && !(r->flags & PF_STRICT)) {
            assert_true(r->lo <= r->hi);
            if (!*r->default_value)
                fail_msg("%s: a number without a default", r->name);
        }
        char why[160];
        if (*r->default_value && zen__param_problem(r, r->default_value, why, sizeof why))
            fail_msg("%s: its default '%s' fails its own check", r->name, r->default_value);
    }
}

static void test_bad_values_are_ignored(void **state)
{
    (void)state;

    static const struct {
        const char *name, *value;
    } bad[] = { { "TIMEOUT_S", "abc" },
                { "TIMEOUT_S", "-1" },
                { "TIMEOUT_S", "0" },
                { "TIMEOUT_S", "5s" },
                { "TIMEOUT_S", "nan" },
                { "RING_CHUNK_BYTES", "0" },
                { "RING_CHUNK_BYTES", "-8" },
                { "RING_CHUNK_BYTES", "99999999999999999999" },
                { "ALLREDUCE_ALGO", "fast" },
                { "SEED", "-5" },
                { "SPARSE_BLOCK_SIZE", "0" },
                { "NET_GBPS", "inf" },
                { "ALLOC_CACHE_MB", "1e3" },
                { "SHM_RING_KB", " 64" },
                { "SHM_RING_KB", "63" },
                { "SPARSE_MODEL_BIAS", "dense=abc" },
                { "SPARSE_MODEL_BIAS", "fast=2" },
                { "SPARSE_MODEL_BIAS", "dense=0" },
                { "LOG_SUBSYS", "coll,nope" } };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char full[64];
        snprintf(full, sizeof full, "ZEN_%s", bad[i].name);
        setenv(full, bad[i].value, 1);
        zen_param_info p = info_of(full);
        assert_string_equal(p.source, "ignored");
        assert_non_null(p.problem);
        assert_string_equal(p.raw_value, bad[i].value);
        assert_string_equal(p.value, p.default_value);
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
    setenv("ZEN_ALLREDUCE_ALGO", "RING", 1); /* any case; readers get the table's spelling */
    assert_string_equal(zen__param_str("ALLREDUCE_ALGO"), "ring");
    unsetenv("ZEN_ALLREDUCE_ALGO");
    setenv("ZEN_SPARSE_MODEL_BIAS", "dense=0.001,BALANCED=3", 1);
    assert_string_equal(zen__param_str("SPARSE_MODEL_BIAS"), "dense=0.001,BALANCED=3");
    unsetenv("ZEN_SPARSE_MODEL_BIAS");
    setenv("ZEN_SEED", "18446744073709551615", 1);
    uint64_t seed = 0;
    assert_int_equal(zen__param_u64("SEED", &seed), 1);
    assert_true(seed == UINT64_MAX);
    unsetenv("ZEN_SEED");
    setenv("ZEN_TIMEOUT_S", "2.5", 1);
    assert_true(zen__param_timeout("TIMEOUT_S") == 2.5);
    setenv("ZEN_TIMEOUT_S", "inf", 1);
    assert_true(isinf(zen__param_timeout("TIMEOUT_S")));
    setenv("ZEN_TIMEOUT_S", "9.3e9", 1); /* past 2^63 ns: no deadline, not an overflow */
    assert_true(isinf(zen__param_timeout("TIMEOUT_S")));
    assert_string_equal(info_of("ZEN_TIMEOUT_S").source, "env");
    unsetenv("ZEN_TIMEOUT_S");
}

/* Every scheme name the sparse API knows is a word of the tables that list schemes. */
static void test_scheme_words_match_the_api(void **state)
{
    (void)state;
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        char v[64];
        snprintf(v, sizeof v, "%s=2", zen_sparse_scheme_name((zen_sparse_scheme)s));
        setenv("ZEN_SPARSE_MODEL_BIAS", v, 1);
        setenv("ZEN_TORCH_SPARSE_SCHEME", zen_sparse_scheme_name((zen_sparse_scheme)s), 1);
        assert_string_equal(info_of("ZEN_SPARSE_MODEL_BIAS").source, "env");
        assert_string_equal(info_of("ZEN_TORCH_SPARSE_SCHEME").source, "env");
    }
    unsetenv("ZEN_SPARSE_MODEL_BIAS");
    unsetenv("ZEN_TORCH_SPARSE_SCHEME");
}

/* `zen info` shows a garbage value as ignored, with the value and the reason. */
static void test_zen_info_shows_ignored(void **state)
{
    (void)state;
    const char *bin = getenv("ZEN_BIN");
    if (!bin)
        fail_msg("ZEN_BIN (the zen CLI) is not set: run this test through ctest");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ZEN_SHM_RING_KB=garbage ZEN_SPARSE_EXPLORE_BUDGET=nan '%s' info",
             bin);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char line[1024];
    int row = 0, why = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "ZEN_SHM_RING_KB ", 16) == 0)
            row += strstr(line, " 512 ") && strstr(line, " ignored ");
        if (strstr(line, "^ ignored ZEN_SHM_RING_KB='garbage': not a decimal integer"))
            why++;
        if (strstr(line, "^ ignored ZEN_SPARSE_EXPLORE_BUDGET='nan': not a finite number"))
            why++;
    }
    assert_int_equal(pclose(f), 0);
    assert_int_equal(row, 1);
    assert_int_equal(why, 2);
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
        cmocka_unit_test(test_every_tunable_rejects_garbage),
        cmocka_unit_test(test_getters_stay_in_bounds),
        cmocka_unit_test(test_rows_are_typed),
        cmocka_unit_test(test_bad_values_are_ignored),
        cmocka_unit_test(test_good_values_are_taken),
        cmocka_unit_test(test_scheme_words_match_the_api),
        cmocka_unit_test(test_zen_info_shows_ignored),
        cmocka_unit_test(test_ns_conversion_saturates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
