/*
 * Hung-peer attribution over shared memory (src/transport/shm_heartbeat.c): a stopped process
 * keeps its liveness socket open, so only its heartbeat word tells. One of four ranks SIGSTOPs
 * itself in an allreduce loop; every survivor must fail within a few heartbeat periods naming
 * that rank and no other (before: each waited the full timeout and blamed whom it waited for).
 * The same in a mixed job (the stopped rank's host peer sees the word, the other host tcp's
 * heartbeats). And the other way round: no alarm during a loop next to busy processes that
 * oversubscribe the cores, and none at all with ZEN_HEARTBEAT_S=inf (the timeout names it, from
 * the heartbeats that stopped).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zen/zen.h>

#include "../tools/free_port.h"
#include "common/clock.h"
#include "shm_jobs.h"
#include "testutil.h"

enum {
    N = 4,
    VICTIM = 2,
    LOOP_ELEMS = 1 << 14
};

typedef struct hb_run {
    zen_transport_kind kind;
    int ranks_per_host; /* 0: all on this host */
    const char *heartbeat_s;
    int timeout_s;
    double stop_after_s; /* the victim stops itself this long into the loop; < 0: nobody stops */
    double loop_s;       /* everybody leaves the loop after this long (when nobody stops) */
} hb_run;

/* Where rank writes its last error; parent: the test process. */
/* A rank: allreduce in a loop until an error (recorded in its file) or the end of the loop. */
static void hb_rank(const hb_run *run, int rank, int port)
{
    int per = run->ranks_per_host;
    zt_set_host_id(rank, &per);
    setenv("ZEN_HEARTBEAT_S", run->heartbeat_s, 1);
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.transport = run->kind;
    o.rank = rank;
    o.world_size = N;
    o.master_addr = "127.0.0.1";
    o.master_port = port;
    o.timeout_s = run->timeout_s;
    zen_comm *c = NULL;
    if (zen_comm_create(&o, &c) != ZEN_OK)
        _exit(2);
    static float x[LOOP_ELEMS];
    zen_status st = ZEN_OK;
    int64_t t0 = zen_now_ns();
    int stopped = 0;
    while (st == ZEN_OK) {
        double t = (double)(zen_now_ns() - t0) / 1e9;
        if (rank == VICTIM && run->stop_after_s >= 0 && t > run->stop_after_s && !stopped) {
            stopped = 1;
            raise(SIGSTOP);
        }
        for (int i = 0; i < LOOP_ELEMS; i++)
            x[i] = 1.0f;
        /* rank 0's clock ends the loop for everybody (element 0 carries its vote) */
        x[0] = rank == 0 && run->stop_after_s < 0 && t > run->loop_s ? 1.0f : 0.0f;
        st = zen_allreduce(c, x, x, LOOP_ELEMS, ZEN_F32, ZEN_SUM);
        if (st == ZEN_OK && x[LOOP_ELEMS - 1] != (float)N)
            st = ZEN_EINTERNAL;
        if (st == ZEN_OK && x[0] != 0.0f)
            break;
    }
    zt_put_result("shmhb", rank, st == ZEN_OK ? "ok" : zen_comm_last_error(c));
    if (st != ZEN_OK)
        zen_comm_abort(c);
    zen_comm_destroy(c);
    _exit(0);
}

/* Busy processes, one per core plus one: the beating threads compete for the CPU. */
static int spawn_busy(pid_t *busy, int max)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cpus > 0 && cpus + 1 < max ? (int)cpus + 1 : max;
    for (int i = 0; i < n; i++) {
        busy[i] = fork();
        if (busy[i] == 0)
            for (volatile uint64_t k = 0;; k++) {
            }
    }
    return n;
}

/* Run the job; lines[r] gets each rank's last error ("ok" when its loop ended), took[r] the
 * seconds from the victim's stop (or the start) to the rank's exit. */
static void run_job(const hb_run *run, int busy_procs, char lines[N][512], double took[N])
{
    int port = zen_free_port();
    pid_t pid[N], busy[16];
    int nbusy = busy_procs ? spawn_busy(busy, 16) : 0;
    fflush(NULL);
    for (int r = 0; r < N; r++) {
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0)
            hb_rank(run, r, port);
    }
    int64_t t_stop = zen_now_ns();
    if (run->stop_after_s >= 0) {
        int status = 0;
        assert_int_equal(waitpid(pid[VICTIM], &status, WUNTRACED), pid[VICTIM]);
        assert_true(WIFSTOPPED(status));
        t_stop = zen_now_ns();
    }
    for (int r = 0; r < N; r++) {
        took[r] = -1;
        if (r == VICTIM && run->stop_after_s >= 0)
            continue;
        int status = 0;
        while (waitpid(pid[r], &status, WNOHANG) == 0 && zen_now_ns() - t_stop < 60e9)
            zen__sleep_ns(10000000);
        took[r] = (double)(zen_now_ns() - t_stop) / 1e9;
    }
    for (int i = 0; i < nbusy; i++) {
        kill(busy[i], SIGKILL);
        waitpid(busy[i], NULL, 0);
    }
    for (int r = 0; r < N; r++) {
        kill(pid[r], SIGKILL);
        waitpid(pid[r], NULL, 0);
        zt_take_result("shmhb", r, lines[r], sizeof lines[r]);
        if (took[r] >= 0)
            fprintf(stderr, "rank %d after %.2f s: %s", r, took[r], lines[r]);
    }
}

/* Every survivor names the victim as silent, none names another rank, all within max_s. */
static void expect_victim_named(const hb_run *run, double max_s)
{
    char lines[N][512];
    double took[N];
    run_job(run, 0, lines, took);
    for (int r = 0; r < N; r++) {
        if (r == VICTIM)
            continue;
        char want[64];
        snprintf(want, sizeof want, "rank %d sent nothing, not even a heartbeat", VICTIM);
        assert_non_null(strstr(lines[r], want));
        for (int other = 0; other < N; other++) {
            char blame[64];
            snprintf(blame, sizeof blame, "rank %d sent nothing", other);
            assert_true(other == VICTIM || strstr(lines[r], blame) == NULL);
        }
        assert_true(took[r] < max_s);
    }
}

static void test_sigstop_shm(void **state)
{
    (void)state;
    hb_run run = { ZEN_TRANSPORT_SHM, 0, "1", 60, 1.0, 0 };
    expect_victim_named(&run, 8); /* 1 s of silence + a period; 60 s without heartbeats */
}

static void test_sigstop_mixed(void **state)
{
    (void)state;
    hb_run run = { ZEN_TRANSPORT_MIXED, 2, "1", 60, 1.0, 0 };
    expect_victim_named(&run, 8);
}

/* Off (nobody watches): the survivors fail by the (short) timeout, not by a watch, and the rank
 * that times out names the rank whose heartbeats stopped (ranks beat even when they do not
 * watch), not the rank it waited for (before: rank 1 named rank 0). */
static void test_sigstop_heartbeat_off(void **state)
{
    (void)state;
    hb_run run = { ZEN_TRANSPORT_SHM, 0, "inf", 4, 1.0, 0 };
    char lines[N][512];
    double took[N];
    run_job(&run, 0, lines, took);
    for (int r = 0; r < N; r++) {
        if (r == VICTIM)
            continue;
        assert_non_null(strstr(lines[r], "rank 2 sent nothing, not even a heartbeat"));
        for (int other = 0; other < N; other++) {
            char blame[64];
            snprintf(blame, sizeof blame, "rank %d sent nothing", other);
            assert_true(other == VICTIM || strstr(lines[r], blame) == NULL);
        }
        assert_true(took[r] >= 3.5);
    }
}

/* ZEN_HEARTBEAT_S=1 (ten times more sensitive than the default), 6 s of allreduce next to
 * busy processes (one more than there are cores): every rank finishes its loop. */
static void test_no_false_alarm_under_load(void **state)
{
    (void)state;
    hb_run run = { ZEN_TRANSPORT_SHM, 0, "1", 60, -1, 6.0 };
    char lines[N][512];
    double took[N];
    run_job(&run, 1, lines, took);
    for (int r = 0; r < N; r++)
        assert_string_equal(lines[r], "ok\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigstop_shm),
        cmocka_unit_test(test_sigstop_mixed),
        cmocka_unit_test(test_sigstop_heartbeat_off),
        cmocka_unit_test(test_no_false_alarm_under_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
