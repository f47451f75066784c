/*
 * The table of transports (src/transport/registry.h) is complete: every row has a name and either
 * an open function with its traits (an endpoint) or a wrap function (a wrapper); names and kinds
 * are unique; every public transport kind but AUTO has its row, and the lookups by kind and name
 * and zen_transport_name agree with the table. A row that forgets its traits or its open function
 * fails here, not at a user's first call. ZEN_TRANSPORT takes its words from the same table
 * (the tunables row only checks the word's form), so a new row needs no tunables edit.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "coll/transport_env.h"
#include "testutil.h"
#include "transport/registry.h"

/* The public kinds (include/zen/zen.h): each but AUTO must have an endpoint row. */
static const zen_transport_kind PUBLIC_KINDS[] = { ZEN_TRANSPORT_INPROC, ZEN_TRANSPORT_TCP,
                                                   ZEN_TRANSPORT_MPI, ZEN_TRANSPORT_SHM,
                                                   ZEN_TRANSPORT_MIXED };

static void check_traits(const zen_transport_desc *d)
{
    const zen_transport_traits *t = &d->traits;
    if (t->reach < ZEN_REACH_THREADS || t->reach > ZEN_REACH_HOSTS)
        fail_msg("transport %s: no reach in its traits", d->name);
    if (!(t->latency_us > 0) || !(t->gbps > 0))
        fail_msg("transport %s: traits need latency_us and gbps > 0 (the cost model's figures)",
                 d->name);
    if (t->wire_copies < -1 || t->wire_copies > 4)
        fail_msg("transport %s: wire_copies %d is not -1 (a network stack) or 0..4", d->name,
                 t->wire_copies);
    if (t->reach == ZEN_REACH_THREADS && t->store_rendezvous)
        fail_msg("transport %s: threads need no store rendezvous", d->name);
}

static void test_every_row_complete(void **state)
{
    (void)state;
    size_t n = zen__transport_count();
    assert_true(n >= 6);
    assert_null(zen__transport_at(n));
    for (size_t i = 0; i < n; i++) {
        const zen_transport_desc *d = zen__transport_at(i);
        assert_non_null(d);
        if (!d->name || !d->name[0])
            fail_msg("row %zu has no name", i);
        if (!d->open == !d->wrap)
            fail_msg("transport %s: a row opens an endpoint or wraps one (exactly one of open, "
                     "wrap)",
                     d->name);
        if (d->wrap) {
            assert_int_equal(d->kind, ZEN_TRANSPORT_AUTO);
            continue;
        }
        if (d->kind == ZEN_TRANSPORT_AUTO)
            fail_msg("transport %s: an endpoint needs its public kind", d->name);
        check_traits(d);
        for (size_t j = 0; j < i; j++) {
            const zen_transport_desc *e = zen__transport_at(j);
            if (strcmp(e->name, d->name) == 0 || (e->open && e->kind == d->kind))
                fail_msg("transports %s and %s share a name or a kind", e->name, d->name);
        }
        assert_ptr_equal(zen__transport_desc(d->kind), d);
        assert_ptr_equal(zen__transport_named(d->name), d);
        assert_string_equal(zen_transport_name(d->kind), d->name);
        assert_ptr_equal(zen__transport_traits(d->kind), &d->traits);
    }
}

static void test_every_public_kind_has_a_row(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof PUBLIC_KINDS / sizeof PUBLIC_KINDS[0]; i++)
        if (!zen__transport_desc(PUBLIC_KINDS[i]))
            fail_msg("public transport kind %d has no row in src/transport/registry.c",
                     (int)PUBLIC_KINDS[i]);
    assert_null(zen__transport_desc(ZEN_TRANSPORT_AUTO));
    assert_string_equal(zen_transport_name(ZEN_TRANSPORT_AUTO), "auto");
    assert_string_equal(zen_transport_name((zen_transport_kind)99), "?");
    /* no row: no reach, and the cost model's network-stack default */
    assert_int_equal(zen__transport_traits(ZEN_TRANSPORT_AUTO)->reach, ZEN_REACH_NONE);
    assert_int_equal(zen__transport_traits(ZEN_TRANSPORT_AUTO)->wire_copies, -1);
}

/* The traits the choices above read, for the transports whose behaviour tests elsewhere pin. */
static void test_known_traits(void **state)
{
    (void)state;
    assert_int_equal(zen__transport_traits(ZEN_TRANSPORT_INPROC)->reach, ZEN_REACH_THREADS);
    assert_int_equal(zen__transport_traits(ZEN_TRANSPORT_SHM)->reach, ZEN_REACH_HOST);
    assert_int_equal(zen__transport_traits(ZEN_TRANSPORT_MIXED)->reach, ZEN_REACH_HOSTS);
    assert_true(zen__transport_traits(ZEN_TRANSPORT_TCP)->store_rendezvous);
    assert_false(zen__transport_traits(ZEN_TRANSPORT_MPI)->store_rendezvous);
    assert_true(zen__transport_traits(ZEN_TRANSPORT_MPI)->native_allreduce);
    assert_false(zen__transport_traits(ZEN_TRANSPORT_SHM)->native_allreduce);
}

/* zen_param_get's view of ZEN_TRANSPORT=v: its source, and its problem when ignored. */
static const char *transport_source(const char *v, const char **problem)
{
    setenv("ZEN_TRANSPORT", v, 1);
    for (size_t i = 0; i < zen_param_count(); i++) {
        zen_param_info p;
        assert_int_equal(zen_param_get(i, &p), ZEN_OK);
        if (strcmp(p.name, "ZEN_TRANSPORT") == 0) {
            *problem = p.problem;
            return p.source;
        }
    }
    fail_msg("no ZEN_TRANSPORT row in the tunables table");
    return NULL;
}

/* Every process transport of the registry is a ZEN_TRANSPORT word (any case) that selects it;
 * anything else (threads only, a wrapper, no row, not a word) is ignored, means auto, and zen info
 * says why, naming the transports that exist. */
static void test_zen_transport_words_from_registry(void **state)
{
    (void)state;
    const char *problem = NULL;
    for (size_t i = 0; i < zen__transport_count(); i++) {
        const zen_transport_desc *d = zen__transport_at(i);
        char upper[32];
        size_t n = 0;
        for (; d->name[n] && n + 1 < sizeof upper; n++)
            upper[n] = (char)toupper((unsigned char)d->name[n]);
        upper[n] = '\0';
        int process = d->open && d->traits.reach >= ZEN_REACH_HOST;
        const char *want = process ? "env" : "ignored";
        const char *got = transport_source(d->name, &problem);
        if (strcmp(got, want) != 0)
            fail_msg("ZEN_TRANSPORT=%s: source %s, want %s", d->name, got, want);
        assert_string_equal(transport_source(upper, &problem), want);
        assert_int_equal(zen__coll_transport_from_env(), process ? d->kind : ZEN_TRANSPORT_MIXED);
    }
    assert_string_equal(transport_source("carrier-pigeon", &problem), "ignored");
    for (size_t i = 0; i < zen__transport_count(); i++) {
        const zen_transport_desc *d = zen__transport_at(i);
        if (d->open && d->traits.reach >= ZEN_REACH_HOST && !strstr(problem, d->name))
            fail_msg("the problem \"%s\" does not list the transport %s", problem, d->name);
    }
    assert_int_equal(zen__coll_transport_from_env(), ZEN_TRANSPORT_MIXED);
    assert_string_equal(transport_source("tcp;sh", &problem), "ignored"); /* not a word */
    assert_int_equal(zen__coll_transport_from_env(), ZEN_TRANSPORT_MIXED);
    assert_string_equal(transport_source("Auto", &problem), "env");
    assert_int_equal(zen__coll_transport_from_env(), ZEN_TRANSPORT_MIXED);
    unsetenv("ZEN_TRANSPORT");
    assert_string_equal(transport_source("", &problem), "default");
    assert_int_equal(zen__coll_transport_from_env(), ZEN_TRANSPORT_MIXED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_row_complete),
        cmocka_unit_test(test_every_public_kind_has_a_row),
        cmocka_unit_test(test_known_traits),
        cmocka_unit_test(test_zen_transport_words_from_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
