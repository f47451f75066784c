/*
 * The rendezvous under a hostile neighbour (docs/security.md): a stranger with the wrong job
 * secret, a stranger without one claiming a rank that is taken, idle connections to the master
 * port, a stranger HELLO on a rank's data listener. Each time the job must still form, with
 * every rank reaching the right peer (checked by an allreduce against the closed-form sum),
 * and the stranger must fail. Ranks are threads of this process (tcp over loopback).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/free_port.h"
#include "bootstrap/auth.h"
#include "bootstrap/rendezvous.h"
#include "common/clock.h"
#include "testutil.h"
#include "transport/tcp_sock.h"

#define MAX_RANKS 8

typedef struct job {
    int size, port;
    double timeout_s;
    zen_status st[MAX_RANKS];
    int sum_ok[MAX_RANKS];
} job;

typedef struct rank_arg {
    job *j;
    int rank;
    pthread_t th;
} rank_arg;

/* One rank: create the communicator, allreduce (rank + 1), check n (n + 1) / 2. */
static void *rank_main(void *p)
{
    rank_arg *a = p;
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.transport = ZEN_TRANSPORT_TCP;
    o.rank = a->rank;
    o.world_size = a->j->size;
    o.master_addr = "127.0.0.1";
    o.master_port = a->j->port;
    o.timeout_s = a->j->timeout_s;
    zen_comm *c = NULL;
    zen_status st = zen_comm_create(&o, &c);
    if (st == ZEN_OK) {
        int32_t v = a->rank + 1;
        st = zen_allreduce(c, &v, &v, 1, ZEN_I32, ZEN_SUM);
        a->j->sum_ok[a->rank] = st == ZEN_OK && v == a->j->size * (a->j->size + 1) / 2;
        zen_comm_destroy(c);
    }
    a->j->st[a->rank] = st;
    return NULL;
}

static void start_rank(rank_arg *a, job *j, int rank)
{
    a->j = j;
    a->rank = rank;
    assert_int_equal(pthread_create(&a->th, NULL, rank_main, a), 0);
}

static void expect_job_ok(job *j, rank_arg *a)
{
    for (int r = 0; r < j->size; r++) {
        pthread_join(a[r].th, NULL);
        if (j->st[r] != ZEN_OK)
            fail_msg("rank %d: %s", r, zen_status_name(j->st[r]));
        assert_true(j->sum_ok[r]);
    }
}

/* Wait until something listens on the master port (rank 0 is up). */
static void wait_master(int port)
{
    for (int i = 0; i < 400; i++) {
        int fd =
            zen__sock_connect(htonl(INADDR_LOOPBACK), (uint16_t)port, zen_now_ns() + 100000000);
        if (fd >= 0) {
            close(fd);
            return;
        }
        zen__sleep_ns(10000000);
    }
    fail_msg("rank 0 never listened on port %d", port);
}

typedef struct stranger {
    int rank, size, port;
    const char *secret; /* NULL: none */
    double timeout_s;
    zen_status st;
    pthread_t th;
} stranger;

static void *stranger_main(void *p)
{
    stranger *s = p;
    zen_job_key key;
    memset(&key, 0, sizeof key);
    if (s->secret)
        zen__job_key_from_secret(&key, s->secret, strlen(s->secret));
    int fds[MAX_RANKS];
    char err[512];
    s->st = zen__rendezvous_keyed(s->rank, s->size, "127.0.0.1", s->port, s->timeout_s, &key, fds,
                                  err, sizeof err);
    for (int q = 0; q < s->size; q++)
        if (fds[q] >= 0)
            close(fds[q]);
    return NULL;
}

/* Run one stranger to the end on its own thread (it blocks like a rank would). */
static void run_stranger(stranger *s)
{
    pthread_create(&s->th, NULL, stranger_main, s);
    pthread_join(s->th, NULL);
}

static int setup_secret(void **state)
{
    (void)state;
    setenv("ZEN_JOB_SECRET", "the-right-secret", 1);
    return 0;
}

static int drop_secret(void **state)
{
    (void)state;
    unsetenv("ZEN_JOB_SECRET");
    return 0;
}

/* A stranger with another secret claims rank 2 before the real rank 2 starts: it cannot join
 * (rank 0 fails its proof, it fails rank 0's), and the job forms with the real rank 2. */
static void test_wrong_secret(void **state)
{
    (void)state;
    job j = { .size = 3, .port = zen_free_port(), .timeout_s = 10 };
    rank_arg a[3];
    start_rank(&a[0], &j, 0);
    start_rank(&a[1], &j, 1);
    wait_master(j.port);
    stranger s = {
        .rank = 2, .size = 3, .port = j.port, .secret = "a-wrong-secret", .timeout_s = 1
    };
    run_stranger(&s);
    assert_int_not_equal(s.st, ZEN_OK);
    start_rank(&a[2], &j, 2);
    expect_job_ok(&j, a);
}

/* Without any secret, a stranger's registration is refused under a secret job. */
static void test_no_secret_stranger(void **state)
{
    (void)state;
    job j = { .size = 2, .port = zen_free_port(), .timeout_s = 10 };
    rank_arg a[2];
    start_rank(&a[0], &j, 0);
    wait_master(j.port);
    stranger s = { .rank = 1, .size = 2, .port = j.port, .secret = NULL, .timeout_s = 1 };
    run_stranger(&s);
    assert_int_not_equal(s.st, ZEN_OK);
    start_rank(&a[1], &j, 1);
    expect_job_ok(&j, a);
}

/* No secret at all: a stranger that registers as a rank that is already taken, or with the
 * wrong world size, is dropped and the job goes on (before, either ended it). */
static void test_duplicate_and_mismatch_without_secret(void **state)
{
    (void)state;
    job j = { .size = 3, .port = zen_free_port(), .timeout_s = 10 };
    rank_arg a[3];
    start_rank(&a[0], &j, 0);
    start_rank(&a[1], &j, 1);
    wait_master(j.port);
    zen__sleep_ns(300 * 1000000); /* rank 1 registered */
    stranger dup = { .rank = 1, .size = 3, .port = j.port, .timeout_s = 1 };
    run_stranger(&dup);
    assert_int_not_equal(dup.st, ZEN_OK);
    stranger wrong = { .rank = 2, .size = 4, .port = j.port, .timeout_s = 1 };
    run_stranger(&wrong);
    assert_int_equal(wrong.st, ZEN_EMISMATCH);
    start_rank(&a[2], &j, 2);
    expect_job_ok(&j, a);
}

/* 8 connections to the master port that never say anything cost nothing: the job forms well
 * within its 4 s timeout (before, each held rank 0 for 5 s in turn). */
static void test_idle_connections(void **state)
{
    (void)state;
    job j = { .size = 4, .port = zen_free_port(), .timeout_s = 4 };
    rank_arg a[4];
    start_rank(&a[0], &j, 0);
    wait_master(j.port);
    int idle[8];
    for (int i = 0; i < 8; i++) {
        idle[i] =
            zen__sock_connect(htonl(INADDR_LOOPBACK), (uint16_t)j.port, zen_now_ns() + 1000000000);
        assert_true(idle[i] >= 0);
    }
    int64_t t0 = zen_now_ns();
    for (int r = 1; r < 4; r++)
        start_rank(&a[r], &j, r);
    expect_job_ok(&j, a);
    assert_true(zen_now_ns() - t0 < 3 * (int64_t)1000000000);
    for (int i = 0; i < 8; i++)
        close(idle[i]);
}

typedef struct mesh_arg {
    int rank, size;
    uint32_t addrs[2];
    uint16_t ports[2];
    int listen_fd;
    const char *secret;
    double timeout_s;
    int fds[2];
    zen_status st;
    pthread_t th;
} mesh_arg;

static void *mesh_main(void *p)
{
    mesh_arg *m = p;
    zen_job_key key;
    zen__job_key_from_secret(&key, m->secret, strlen(m->secret));
    char err[512];
    m->st = zen__rendezvous_mesh(m->rank, m->size, m->addrs, m->ports, m->listen_fd, &key,
                                 m->timeout_s, m->fds, err, sizeof err);
    return NULL;
}

/* The mesh step alone (the entry the store-based rendezvous uses): a stranger HELLO with the
 * wrong secret on rank 0's data listener is refused; the real rank 1 then connects, and the
 * two sockets are the two ends of one connection. */
static void test_stranger_hello(void **state)
{
    (void)state;
    uint32_t lo = htonl(INADDR_LOOPBACK);
    uint16_t p0 = 0, p1 = 0;
    int l0 = zen__sock_listen(lo, 0, 0, &p0), l1 = zen__sock_listen(lo, 0, 0, &p1);
    assert_true(l0 >= 0 && l1 >= 0);
    mesh_arg r0 = { .rank = 0,
                    .size = 2,
                    .addrs = { lo, lo },
                    .ports = { p0, p1 },
                    .listen_fd = l0,
                    .secret = "mesh-secret",
                    .timeout_s = 10 };
    mesh_arg bad = r0, r1 = r0;
    bad.rank = 1;
    bad.listen_fd = l1;
    bad.secret = "not-the-mesh-secret";
    bad.timeout_s = 2;
    r1.rank = 1;
    r1.listen_fd = l1;
    pthread_create(&r0.th, NULL, mesh_main, &r0);
    pthread_create(&bad.th, NULL, mesh_main, &bad);
    pthread_join(bad.th, NULL);
    assert_int_not_equal(bad.st, ZEN_OK);
    pthread_create(&r1.th, NULL, mesh_main, &r1);
    pthread_join(r1.th, NULL);
    pthread_join(r0.th, NULL);
    assert_int_equal(r0.st, ZEN_OK);
    assert_int_equal(r1.st, ZEN_OK);
    char c = 'z', got = 0;
    assert_int_equal(write(r1.fds[0], &c, 1), 1);
    assert_int_equal(zen__sock_read_all(r0.fds[1], &got, 1, zen_now_ns() + 2000000000), 0);
    assert_int_equal(got, 'z');
    close(r0.fds[1]);
    close(r1.fds[0]);
    close(l0);
    close(l1);
}

/* ZEN_REQUIRE_SECRET=1 refuses to start without a secret, at once. */
static void test_require_secret(void **state)
{
    (void)state;
    setenv("ZEN_REQUIRE_SECRET", "1", 1);
    int fds[2];
    char err[512];
    assert_int_equal(zen__rendezvous(1, 2, "127.0.0.1", zen_free_port(), 5, fds, err, sizeof err),
                     ZEN_EINVAL);
    assert_non_null(strstr(err, "ZEN_REQUIRE_SECRET"));
    unsetenv("ZEN_REQUIRE_SECRET");
}

/* A rank of a ring allreduce loop: until a collective fails; then its error goes to out. */
static void stop_victim_rank(int rank, int size, int port, const char *out)
{
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.transport = ZEN_TRANSPORT_TCP;
    o.rank = rank;
    o.world_size = size;
    o.master_addr = "127.0.0.1";
    o.master_port = port;
    o.timeout_s = 60;
    zen_comm *c = NULL;
    if (zen_comm_create(&o, &c) != ZEN_OK)
        _exit(2);
    static float x[1 << 16];
    zen_status st = ZEN_OK;
    while (st == ZEN_OK)
        st = zen_allreduce_with(c, x, x, 1 << 16, ZEN_F32, ZEN_SUM, ZEN_ALLREDUCE_RING);
    FILE *f = fopen(out, "w");
    if (f) {
        fprintf(f, "%s\n", zen_comm_last_error(c));
        fclose(f);
    }
    zen_comm_abort(c);
    zen_comm_destroy(c);
    _exit(0);
}

/* SIGSTOP one rank of four in a ring allreduce loop: every survivor fails within a few
 * heartbeat periods and names the stopped rank, not its ring neighbour (before: each waited the
 * full timeout and blamed the rank it was waiting for). */
static void test_sigstop_attribution(void **state)
{
    (void)state;

    enum {
        N = 4,
        VICTIM = 2
    };

    setenv("ZEN_HEARTBEAT_S", "1", 1);
    int port = zen_free_port();
    char out[N][64];
    pid_t pid[N];
    for (int r = 0; r < N; r++) {
        snprintf(out[r], sizeof out[r], "/tmp/zen-stop-%d-%d", (int)getpid(), r);
        unlink(out[r]);
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0)
            stop_victim_rank(r, N, port, out[r]);
    }
    unsetenv("ZEN_HEARTBEAT_S");
    zen__sleep_ns(1500 * (int64_t)1000000); /* the mesh forms, the loop runs */
    kill(pid[VICTIM], SIGSTOP);
    int64_t t0 = zen_now_ns();
    double took[N] = { 0 };
    for (int r = 0; r < N; r++) {
        if (r == VICTIM)
            continue;
        int status = 0;
        while (waitpid(pid[r], &status, WNOHANG) == 0 && zen_now_ns() - t0 < 30e9)
            zen__sleep_ns(10000000);
        took[r] = (double)(zen_now_ns() - t0) / 1e9;
    }
    kill(pid[VICTIM], SIGKILL);
    waitpid(pid[VICTIM], NULL, 0);
    for (int r = 0; r < N; r++) {
        if (r == VICTIM)
            continue;
        kill(pid[r], SIGKILL);
        waitpid(pid[r], NULL, 0);
        char line[1024] = "";
        FILE *f = fopen(out[r], "r");
        assert_non_null(f);
        assert_non_null(fgets(line, sizeof line, f));
        fclose(f);
        unlink(out[r]);
        fprintf(stderr, "survivor %d after %.2f s: %s", r, took[r], line);
        assert_non_null(strstr(line, "rank 2 sent nothing, not even a heartbeat"));
        assert_true(took[r] < 10);
    }
}

/* A rank of a 3-rank job that only tries to form; its rendezvous error goes to out. */
static void forming_rank(int rank, int port, const char *out)
{
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.transport = ZEN_TRANSPORT_TCP;
    o.rank = rank;
    o.world_size = 3;
    o.master_addr = "127.0.0.1";
    o.master_port = port;
    o.timeout_s = 20;
    zen_comm *c = NULL;
    zen_status st = zen_comm_create(&o, &c);
    FILE *f = fopen(out, "w");
    if (f) {
        fprintf(f, "%s\n", zen_status_name(st));
        fclose(f);
    }
    _exit(st == ZEN_OK ? 0 : 1);
}

/* A rank that dies after registering (rank 2 never comes): rank 0 names it at once instead of
 * waiting its 20 s timeout for rank 2. */
static void test_death_after_registration(void **state)
{
    (void)state;
    int port = zen_free_port();
    char out[64];
    snprintf(out, sizeof out, "/tmp/zen-reg-death-%d", (int)getpid());
    unlink(out);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t r0 = fork();
    assert_true(r0 >= 0);
    if (r0 == 0) {
        dup2(fds[1], 2); /* rank 0's log, to find the message */
        close(fds[0]);
        forming_rank(0, port, out);
    }
    close(fds[1]);
    pid_t r1 = fork();
    assert_true(r1 >= 0);
    if (r1 == 0)
        forming_rank(1, port, "/dev/null");
    zen__sleep_ns(1000 * (int64_t)1000000); /* rank 1 registered and waits for the table */
    kill(r1, SIGKILL);
    waitpid(r1, NULL, 0);
    int64_t t0 = zen_now_ns();
    int status = 0;
    waitpid(r0, &status, 0);
    double took = (double)(zen_now_ns() - t0) / 1e9;
    char log[8192];
    ssize_t n = read(fds[0], log, sizeof log - 1);
    close(fds[0]);
    log[n > 0 ? n : 0] = '\0';
    unlink(out);
    fprintf(stderr, "rank 0 failed %.2f s after rank 1's death\n", took);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    assert_non_null(strstr(log, "rank 1 closed its connection during the rendezvous"));
    assert_true(took < 5);
}

static zen_status one_allreduce(zen_comm *c, void *arg)
{
    (void)arg;
    int32_t v = 1;
    return zen_allreduce(c, &v, &v, 1, ZEN_I32, ZEN_SUM);
}

/* When some rank threads cannot be created (address space exhausted here), the ranks that
 * started fail at once instead of waiting the whole timeout for the missing ones. */
static void test_inproc_thread_failure(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl;
        getrlimit(RLIMIT_AS, &rl);
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (!f || fscanf(f, "%lu", &pages) != 1)
            _exit(3);
        fclose(f);
        /* room for a few 8 MiB thread stacks, not for 64 */
        rl.rlim_cur = pages * (unsigned long)sysconf(_SC_PAGESIZE) + (48ul << 20);
        setrlimit(RLIMIT_AS, &rl);
        zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
        o.timeout_s = 60;
        int64_t t0 = zen_now_ns();
        zen_status st = zen_run_inproc(64, &o, one_allreduce, NULL, NULL);
        double took = (double)(zen_now_ns() - t0) / 1e9;
        fprintf(stderr, "zen_run_inproc(64) under RLIMIT_AS: %s after %.2f s\n",
                zen_status_name(st), took);
        _exit(st != ZEN_OK && took < 10 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* kill -9 of `zen launch` takes its ranks with it (PR_SET_PDEATHSIG): they are gone within a
 * few seconds instead of running on as orphans. */
static void test_killed_launcher_takes_ranks(void **state)
{
    (void)state;
    const char *bin = getenv("ZEN_BIN");
    if (!bin)
        skip();
    char pids_file[] = "/tmp/zen-launch-pids-XXXXXX";
    int fd = mkstemp(pids_file);
    assert_true(fd >= 0);
    close(fd);
    char script[512];
    snprintf(script, sizeof script, "echo $$ >> %s; exec sleep 60", pids_file);
    pid_t launcher = fork();
    assert_true(launcher >= 0);
    if (launcher == 0) {
        execl(bin, bin, "launch", "-n", "3", "--", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    long pids[3];
    int n = 0;
    for (int tries = 0; tries < 500 && n < 3; tries++) {
        zen__sleep_ns(10000000);
        FILE *f = fopen(pids_file, "r");
        n = 0;
        while (f && n < 3 && fscanf(f, "%ld", &pids[n]) == 1)
            n++;
        if (f)
            fclose(f);
    }
    assert_int_equal(n, 3);
    kill(launcher, SIGKILL);
    waitpid(launcher, NULL, 0);
    int64_t t0 = zen_now_ns();
    int alive = 3;
    while (alive > 0 && zen_now_ns() - t0 < 5 * (int64_t)1000000000) {
        alive = 0;
        for (int i = 0; i < 3; i++)
            alive += kill((pid_t)pids[i], 0) == 0;
        zen__sleep_ns(20000000);
    }
    unlink(pids_file);
    assert_int_equal(alive, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wrong_secret, setup_secret, drop_secret),
        cmocka_unit_test_setup_teardown(test_no_secret_stranger, setup_secret, drop_secret),
        cmocka_unit_test(test_duplicate_and_mismatch_without_secret),
        cmocka_unit_test_setup_teardown(test_idle_connections, setup_secret, drop_secret),
        cmocka_unit_test(test_stranger_hello),
        cmocka_unit_test(test_require_secret),
        cmocka_unit_test(test_killed_launcher_takes_ranks),
        cmocka_unit_test(test_sigstop_attribution),
        cmocka_unit_test(test_inproc_thread_failure),
        cmocka_unit_test(test_death_after_registration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
