/*
 * Store rendezvous (zen_comm_create_with_store): ranks are threads of this process that share an
 * in-memory key-value store and build the real tcp mesh through it; checked with an allreduce
 * against the closed-form sum, plus the failure paths (a rank that never comes, a garbage
 * address in the store, bad arguments, ZEN_REQUIRE_SECRET=1 without a secret).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zen/store.h>

#include "common/clock.h"
#include "testutil.h"

enum {
    MAX_KEYS = 64,
    KEY_CAP = 64,
    VALUE_CAP = 64
};

typedef struct mem_store {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int count;
    char keys[MAX_KEYS][KEY_CAP];
    char values[MAX_KEYS][VALUE_CAP];
    size_t lens[MAX_KEYS];
    int sets;
} mem_store;

static int find_key(mem_store *m, const char *key)
{
    for (int i = 0; i < m->count; i++)
        if (strcmp(m->keys[i], key) == 0)
            return i;
    return -1;
}

static zen_status mem_set(void *ctx, const char *key, const void *value, size_t bytes)
{
    mem_store *m = ctx;
    if (bytes > VALUE_CAP || strlen(key) >= KEY_CAP)
        return ZEN_EINVAL;
    pthread_mutex_lock(&m->lock);
    int i = find_key(m, key);
    if (i < 0 && m->count < MAX_KEYS)
        i = m->count++;
    if (i >= 0) {
        snprintf(m->keys[i], KEY_CAP, "%s", key);
        memcpy(m->values[i], value, bytes);
        m->lens[i] = bytes;
        m->sets++;
    }
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    return i >= 0 ? ZEN_OK : ZEN_ENOMEM;
}

static zen_status mem_get(void *ctx, const char *key, void *value, size_t capacity, size_t *bytes,
                          double timeout_s)
{
    mem_store *m = ctx;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (long long)(timeout_s * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    zen_status st = ZEN_OK;
    pthread_mutex_lock(&m->lock);
    int i;
    while ((i = find_key(m, key)) < 0)
        if (pthread_cond_timedwait(&m->changed, &m->lock, &until) != 0) {
            st = ZEN_ETIMEDOUT;
            break;
        }
    if (i >= 0) {
        *bytes = m->lens[i];
        if (m->lens[i] > capacity)
            st = ZEN_EPROTO;
        else
            memcpy(value, m->values[i], m->lens[i]);
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

static void mem_init(mem_store *m, zen_store *s)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->changed, NULL);
    s->ctx = m;
    s->set = mem_set;
    s->get = mem_get;
}

static void mem_fini(mem_store *m)
{
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->changed);
}

typedef struct rank_job {
    pthread_t thread;
    zen_store *store;
    int rank, size;
    double timeout_s;
    double delay_s;               /* start this long after the others (torch's rank 0) */
    zen_transport_kind transport; /* 0: auto */
    zen_status create_status;
    zen_status allreduce_status;
    double got[8];
    char error[256];
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    if (j->delay_s > 0) {
        struct timespec d = { (time_t)j->delay_s,
                              (long)((j->delay_s - (double)(time_t)j->delay_s) * 1e9) };
        nanosleep(&d, NULL);
    }
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.rank = j->rank;
    o.world_size = j->size;
    o.timeout_s = j->timeout_s;
    o.master_addr = "127.0.0.1";
    o.transport = j->transport;
    zen_comm *c = NULL;
    j->create_status = zen_comm_create_with_store(&o, j->store, &c);
    if (j->create_status != ZEN_OK)
        return NULL;
    for (int i = 0; i < 8; i++)
        j->got[i] = (double)(j->rank + 1) * (i + 1);
    j->allreduce_status = zen_allreduce(c, j->got, j->got, 8, ZEN_F64, ZEN_SUM);
    snprintf(j->error, sizeof j->error, "%s", zen_comm_last_error(c));
    zen_comm_destroy(c);
    return NULL;
}

/* Start ranks [0, started) of a world of size on threads and join them. */
static void run_ranks_over(rank_job *jobs, int started, int size, zen_store *store,
                           double timeout_s, zen_transport_kind transport)
{
    for (int r = 0; r < started; r++) {
        jobs[r] = (rank_job){
            .store = store, .rank = r, .size = size, .timeout_s = timeout_s, .transport = transport
        };
        assert_int_equal(pthread_create(&jobs[r].thread, NULL, rank_main, &jobs[r]), 0);
    }
    for (int r = 0; r < started; r++)
        pthread_join(jobs[r].thread, NULL);
}

static void run_ranks(rank_job *jobs, int started, int size, zen_store *store, double timeout_s)
{
    run_ranks_over(jobs, started, size, store, timeout_s, ZEN_TRANSPORT_AUTO);
}

static void test_mesh_through_store(void **state)
{
    (void)state;
    for (int n = 1; n <= 5; n++) {
        mem_store m;
        zen_store s;
        mem_init(&m, &s);
        rank_job jobs[5];
        run_ranks(jobs, n, n, &s, 20);
        double ranks_sum = (double)n * (n + 1) / 2;
        for (int r = 0; r < n; r++) {
            assert_int_equal(jobs[r].create_status, ZEN_OK);
            assert_int_equal(jobs[r].allreduce_status, ZEN_OK);
            for (int i = 0; i < 8; i++)
                assert_true(jobs[r].got[i] == ranks_sum * (i + 1));
        }
        /* one address key per rank, nothing else goes through the store (a rank that waited
         * longer than 0.5 s republishes its own key) */
        assert_int_equal(m.count, n > 1 ? n : 0);
        assert_true(m.sets >= m.count);
        mem_fini(&m);
    }
}

static void test_missing_rank_is_named(void **state)
{
    (void)state;
    mem_store m;
    zen_store s;
    mem_init(&m, &s);
    rank_job jobs[3];
    run_ranks(jobs, 2, 3, &s, 0.5); /* rank 2 never starts */
    for (int r = 0; r < 2; r++)
        assert_int_equal(jobs[r].create_status, ZEN_ETIMEDOUT);
    mem_fini(&m);
}

/* The log lines of the Store rendezvous, kept for test_wrong_world_size_names_who. */
static char store_lines[32][400];
static int store_nlines;

static void keep_store_lines(zen_log_level level, const char *subsys, const char *line, void *user)
{
    (void)user;
    (void)level;
    if (strcmp(subsys, "bootstrap") == 0 && strstr(line, "store rendezvous") && store_nlines < 32)
        snprintf(store_lines[store_nlines++], sizeof store_lines[0], "%s", line);
}

static int count_lines(const char *a, const char *b)
{
    int n = 0;
    for (int i = 0; i < store_nlines; i++)
        n += strstr(store_lines[i], a) && strstr(store_lines[i], b);
    return n;
}

/*
 * A world size larger than the ranks started (2 of 4): while they wait, each rank says every
 * ZEN_WAIT_REPORT_S whom it waits for, and at the deadline both say how many arrived and name
 * every missing rank (rank 1 used to blame rank 0, which had arrived).
 */
static void test_wrong_world_size_names_who(void **state)
{
    (void)state;
    mem_store m;
    zen_store s;
    mem_init(&m, &s);
    setenv("ZEN_WAIT_REPORT_S", "0.2", 1);
    store_nlines = 0;
    zen_log_set_sink(keep_store_lines, NULL);
    rank_job jobs[4];
    run_ranks(jobs, 2, 4, &s, 1.0); /* ranks 2 and 3 never start */
    zen_log_set_sink(NULL, NULL);
    unsetenv("ZEN_WAIT_REPORT_S");
    for (int r = 0; r < 2; r++)
        assert_int_equal(jobs[r].create_status, ZEN_ETIMEDOUT);
    for (int i = 0; i < store_nlines; i++)
        printf("  log: %s\n", store_lines[i]);
    assert_int_equal(count_lines("rank 0: store", "2 of 4 ranks arrived within"), 1);
    assert_int_equal(count_lines("rank 1: store", "2 of 4 ranks arrived within"), 1);
    assert_int_equal(count_lines("2 of 4", "missing: ranks 2, 3 ("), 2);
    assert_true(count_lines("rank 0: store", "still waiting for ranks 2, 3 (2 of 4") >= 1);
    assert_true(count_lines("rank 1: store", "still waiting for ranks 2, 3 (2 of 4") >= 1);
    assert_int_equal(count_lines("rank 0 never", ""), 0);
    mem_fini(&m);
}

/*
 * torch's TCPStore holds rank 0 for the whole timeout (and up to 1 s more) before the backend
 * starts when fewer ranks joined than its world size. Rank 0 here starts 1.2 s late with a 1 s
 * timeout, rank 2 never: rank 1 waits past its deadline (the grace) and counts rank 0 as arrived
 * instead of blaming it, and both name rank 2 only.
 */
static void test_late_rank_is_not_blamed(void **state)
{
    (void)state;
    mem_store m;
    zen_store s;
    mem_init(&m, &s);
    store_nlines = 0;
    zen_log_set_sink(keep_store_lines, NULL);
    rank_job jobs[2];
    for (int r = 0; r < 2; r++) {
        jobs[r] = (rank_job){ .store = &s, .rank = r, .size = 3, .timeout_s = 1.0 };
        jobs[r].delay_s = r == 0 ? 1.2 : 0;
        assert_int_equal(pthread_create(&jobs[r].thread, NULL, rank_main, &jobs[r]), 0);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(jobs[r].thread, NULL);
    zen_log_set_sink(NULL, NULL);
    for (int i = 0; i < store_nlines; i++)
        printf("  log: %s\n", store_lines[i]);
    for (int r = 0; r < 2; r++)
        assert_int_equal(jobs[r].create_status, ZEN_ETIMEDOUT);
    assert_int_equal(count_lines("rank 0: store", "2 of 3 ranks arrived within"), 1);
    assert_int_equal(count_lines("rank 1: store", "2 of 3 ranks arrived within"), 1);
    assert_int_equal(count_lines("2 of 3", "missing: rank 2 ("), 2);
    mem_fini(&m);
}

/*
 * A rank that arrives after the others have waited gives up with them, not a whole timeout of
 * its own later: rank 1 (not a thread here, only its key) published that it will wait 300 ms
 * more; rank 0, with a 30 s timeout, fails naming rank 2 long before its own 30 s (it waited
 * the whole 30 s before).
 */
static void test_late_rank_gives_up_with_the_others(void **state)
{
    (void)state;
    mem_store m;
    zen_store s;
    mem_init(&m, &s);
    assert_int_equal(mem_set(&m, "zen/tcp/1", "127.0.0.1:9 +300", 16), ZEN_OK);
    store_nlines = 0;
    zen_log_set_sink(keep_store_lines, NULL);
    rank_job jobs[1];
    int64_t t0 = zen_now_ns();
    run_ranks(jobs, 1, 3, &s, 30);
    double took = (double)(zen_now_ns() - t0) / 1e9;
    zen_log_set_sink(NULL, NULL);
    for (int i = 0; i < store_nlines; i++)
        printf("  log: %s\n", store_lines[i]);
    assert_int_equal(jobs[0].create_status, ZEN_ETIMEDOUT);
    assert_int_equal(count_lines("rank 0: store", "2 of 3 ranks arrived within"), 1);
    assert_int_equal(count_lines("2 of 3", "missing: rank 2 ("), 1);
    assert_true(took < 15); /* about 0.3 s; generous against a loaded machine */
    mem_fini(&m);
}

static void test_garbage_address_is_refused(void **state)
{
    (void)state;
    mem_store m;
    zen_store s;
    mem_init(&m, &s);
    assert_int_equal(mem_set(&m, "zen/tcp/1", "not-an-address", 14), ZEN_OK);
    rank_job jobs[1];
    run_ranks(jobs, 1, 2, &s, 5);
    assert_int_equal(jobs[0].create_status, ZEN_EPROTO);
    mem_fini(&m);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    mem_store m;
    zen_store s;
    mem_init(&m, &s);
    zen_comm *c = (zen_comm *)&m;
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    assert_int_equal(zen_comm_create_with_store(&o, &s, &c), ZEN_EINVAL); /* no rank */
    assert_null(c);
    o.rank = 0;
    o.world_size = 1;
    assert_int_equal(zen_comm_create_with_store(&o, NULL, &c), ZEN_EINVAL);
    zen_store no_get = s;
    no_get.get = NULL;
    assert_int_equal(zen_comm_create_with_store(&o, &no_get, &c), ZEN_EINVAL);
    o.rank = 1;
    assert_int_equal(zen_comm_create_with_store(&o, &s, &c), ZEN_EINVAL);
    o.rank = 0;
    o.transport = ZEN_TRANSPORT_INPROC;
    assert_int_equal(zen_comm_create_with_store(&o, &s, &c), ZEN_EUNSUPPORTED);
    mem_fini(&m);
}

static atomic_int refusals; /* log lines that name ZEN_REQUIRE_SECRET */

static void count_refusals(zen_log_level level, const char *subsys, const char *line, void *user)
{
    (void)subsys;
    (void)user;
    if (level == ZEN_LOG_ERROR && strstr(line, "ZEN_REQUIRE_SECRET=1 but no job secret"))
        atomic_fetch_add(&refusals, 1);
}

/*
 * ZEN_REQUIRE_SECRET=1 and no secret: every rank refuses on the Store path (the one the PyTorch
 * backend takes) at once, before it publishes anything, whatever the transport (tcp, shm whose
 * liveness sockets are a mesh too, auto); with a secret the same job runs, and a malformed
 * ZEN_REQUIRE_SECRET is refused rather than read as 0.
 */
static void test_require_secret(void **state)
{
    (void)state;
    static const zen_transport_kind kinds[] = { ZEN_TRANSPORT_TCP, ZEN_TRANSPORT_SHM,
                                                ZEN_TRANSPORT_AUTO };
    setenv("ZEN_REQUIRE_SECRET", "1", 1);
    unsetenv("ZEN_JOB_SECRET");
    unsetenv("ZEN_JOB_SECRET_FILE");
    zen_log_set_sink(count_refusals, NULL);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        mem_store m;
        zen_store s;
        mem_init(&m, &s);
        rank_job jobs[3];
        atomic_store(&refusals, 0);
        int64_t t0 = zen_now_ns();
        run_ranks_over(jobs, 3, 3, &s, 20, kinds[k]);
        for (int r = 0; r < 3; r++)
            assert_int_equal(jobs[r].create_status, ZEN_EINVAL);
        assert_true(zen_now_ns() - t0 < 2000000000LL); /* at once, not at the 20 s deadline */
        assert_int_equal(m.sets, 0);                   /* nobody published an address */
        assert_true(atomic_load(&refusals) >= 3);
        mem_fini(&m);
    }
    zen_log_set_sink(NULL, NULL);

    setenv("ZEN_JOB_SECRET", "store-path-secret", 1);
    mem_store m;
    zen_store s;
    mem_init(&m, &s);
    rank_job jobs[3];
    run_ranks_over(jobs, 3, 3, &s, 20, ZEN_TRANSPORT_TCP);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(jobs[r].create_status, ZEN_OK);
        assert_int_equal(jobs[r].allreduce_status, ZEN_OK);
        assert_true(jobs[r].got[7] == 6.0 * 8);
    }
    mem_fini(&m);
    unsetenv("ZEN_JOB_SECRET");

    setenv("ZEN_REQUIRE_SECRET", "yes", 1);
    mem_init(&m, &s);
    run_ranks_over(jobs, 2, 2, &s, 20, ZEN_TRANSPORT_TCP);
    for (int r = 0; r < 2; r++)
        assert_int_equal(jobs[r].create_status, ZEN_EINVAL);
    mem_fini(&m);
    unsetenv("ZEN_REQUIRE_SECRET");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mesh_through_store),
        cmocka_unit_test(test_missing_rank_is_named),
        cmocka_unit_test(test_wrong_world_size_names_who),
        cmocka_unit_test(test_late_rank_is_not_blamed),
        cmocka_unit_test(test_late_rank_gives_up_with_the_others),
        cmocka_unit_test(test_garbage_address_is_refused),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_require_secret),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
