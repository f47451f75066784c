/*
 * The shm setup socket under attack (docs/security.md, "The shm setup socket"). Its abstract name
 * is listed in /proc/net/unix to every local user; these tests connect to it before any peer
 * can (through the test-only hook zen__shm_boot_test_hook, called as soon as it listens) from
 * another process: a silent connection, one that sends garbage, one that forges a rank's message,
 * one that sends a few bytes and stops, one that connects and closes. A 4-rank shm job must still
 * come up and verify an allreduce on every rank, every stranger connection must be closed by
 * the time the job runs, and each rank that accepts must have logged the refusals. Then the
 * same from a process of another user (root only: setuid to nobody), and a job in which two
 * ranks stall before handing over: the others time out naming both.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "shm_jobs.h"
#include "testutil.h"
#include "transport/shm_internal.h"

#define CHECK(cond) ZT_CHECK(c, cond)
#define NRANKS      4
#define NHELD       3 /* stranger connections kept open until the rank closes them */

/* Shared with the forked ranks (MAP_SHARED): the error lines that name ranks that never handed
 * over, as the ranks logged them. */
typedef struct shared_log {
    atomic_int n;
    char line[NRANKS][512];
    atomic_int waiting;    /* progress lines naming both stalled ranks */
    atomic_int answering;  /* progress lines of ranks 2, 3 waiting for rank 1's answer */
    atomic_int unanswered; /* their errors at the deadline */
} shared_log;

static shared_log *shared;
/* Test settings, set before the ranks are forked. */
static int stranger_uid = -1; /* -1: the test's own user */
static int stranger_gid = -1;
static int stall_rank_from = -1; /* ranks >= this sleep 5 s before handing over (-1: none) */
static int stall_rank_only = -1; /* this rank sleeps 3 s before handing over (-1: none) */
/* In a rank: its stranger, the pipe on which it reports, and the refusals the rank logged. */
static pid_t stranger_pid = -1;
static int report_fd = -1;
static atomic_int refused_lines, other_user_lines;

static void sink(zen_log_level level, const char *subsys, const char *line, void *user)
{
    (void)level;
    (void)subsys;
    (void)user;
    fprintf(stderr, "%s\n", line);
    if (strstr(line, "refused a connection to the shm setup socket"))
        refused_lines++;
    if (strstr(line, "belongs to another user"))
        other_user_lines++;
    if (strstr(line, "shm setup: still waiting for ranks 2, 3 to hand over their segments ("))
        atomic_fetch_add(&shared->waiting, 1);
    if (strstr(line, "shm setup: still waiting for rank 1 to answer the hand-over ("))
        atomic_fetch_add(&shared->answering, 1);
    if (strstr(line, "shm: rank 1 never answered the hand-over"))
        atomic_fetch_add(&shared->unanswered, 1);
    if (strstr(line, "never handed over")) {
        int k = atomic_fetch_add(&shared->n, 1);
        if (k < NRANKS)
            snprintf(shared->line[k], sizeof shared->line[k], "%s", line);
    }
}

static int connect_to(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(sa.sun_path + 1, name, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (connect(fd, (struct sockaddr *)&sa, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/*
 * The stranger (a child of the rank, so another pid): connects NHELD + 1 times, tells the rank
 * it is done through ready, then waits until the rank has closed every held connection and
 * reports 'C' (all closed) or 'O' (some still open after 60 s) on report. Only async-signal-safe
 * calls: the rank may have threads.
 */
static void stranger(const char *name, int ready, int report)
{
    /* a real stranger holds none of the rank's descriptors (the listener among them: held, it
     * would keep the stranger's unaccepted connections open after the rank closed it) */
    for (int fd = 3; fd < 1024; fd++)
        if (fd != ready && fd != report)
            close(fd);
    if (stranger_uid >= 0 && (setgid((gid_t)stranger_gid) != 0 || setuid((uid_t)stranger_uid) != 0))
        _exit(3);
    int held[NHELD];
    held[0] = connect_to(name); /* silent */
    held[1] = connect_to(name); /* garbage */
    static const char junk[16] = "GET / HTTP/1.0\r\n";
    if (held[1] >= 0 && write(held[1], junk, sizeof junk) != (ssize_t)sizeof junk)
        _exit(4);
    held[2] = connect_to(name); /* a forged hand-over: our magic, rank 1's number, no descriptor */
    uint32_t forged[4] = { 0x4d48535au, 1, 4096, 0 };
    if (held[2] >= 0 && write(held[2], forged, sizeof forged) != (ssize_t)sizeof forged)
        _exit(4);
    int three = connect_to(name); /* three bytes of a hand-over, then nothing */
    if (three >= 0 && write(three, forged, 3) != 3)
        _exit(4);
    int quit = connect_to(name); /* connects and closes */
    for (int i = 0; i < NHELD; i++)
        if (held[i] < 0)
            _exit(5);
    if (three < 0 || quit < 0)
        _exit(5);
    close(quit);
    char b = 'r';
    if (write(ready, &b, 1) != 1)
        _exit(6);
    int open = NHELD + 1;
    int fds[NHELD + 1] = { held[0], held[1], held[2], three };
    for (int waited = 0; open > 0 && waited < 600; waited++) {
        struct pollfd pf[NHELD + 1];
        for (int i = 0; i < NHELD + 1; i++)
            pf[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
        if (poll(pf, NHELD + 1, 100) <= 0)
            continue;
        for (int i = 0; i < NHELD + 1; i++) {
            char got[64];
            if (fds[i] >= 0 && pf[i].revents && read(fds[i], got, sizeof got) <= 0) {
                close(fds[i]);
                fds[i] = -1;
                open--;
            }
        }
    }
    b = open == 0 ? 'C' : 'O';
    if (write(report, &b, 1) != 1)
        _exit(6);
    _exit(0);
}

/* Runs in each rank: at stage 0 (the setup socket listens, before any peer knows its name) start
 * the stranger and wait until it has connected; at stage 1 (the hand-over starts) stall the
 * ranks the test wants stalled. */
static void hook(int stage, int rank, const char *sock_name)
{
    if (stage == 1) {
        if (stall_rank_from >= 0 && rank >= stall_rank_from) {
            struct timespec t = { 5, 0 };
            nanosleep(&t, NULL);
        }
        if (rank == stall_rank_only) {
            struct timespec t = { 3, 0 };
            nanosleep(&t, NULL);
        }
        return;
    }
    zen_log_set_sink(sink, NULL);
    if (stall_rank_from >= 0 || stall_rank_only >= 0)
        return;
    int ready[2], report[2];
    if (pipe(ready) != 0 || pipe(report) != 0)
        return;
    stranger_pid = fork();
    if (stranger_pid == 0) {
        close(ready[0]);
        close(report[0]);
        stranger(sock_name, ready[1], report[1]);
    }
    close(ready[1]);
    close(report[1]);
    report_fd = report[0];
    char b = 0;
    struct pollfd pf = { .fd = ready[0], .events = POLLIN };
    if (poll(&pf, 1, 10000) == 1 && read(ready[0], &b, 1) == 1 && b == 'r')
        fprintf(stderr, "stranger %d connected to @%s\n", (int)stranger_pid, sock_name);
    else
        fprintf(stderr, "stranger %d did not connect to @%s\n", (int)stranger_pid, sock_name);
    close(ready[0]);
}

/*
 * The job itself: an allreduce checked against the closed form; then this rank's stranger must
 * report every held connection closed, and a rank with higher local peers (it accepts) must
 * have logged refusals, of another user when the stranger was one.
 */
static zen_status sc_job(zen_comm *c, void *arg)
{
    (void)arg;
    int n = zen_comm_size(c), r = zen_comm_rank(c);

    enum {
        N = 1000
    };

    float v[N];
    for (int i = 0; i < N; i++)
        v[i] = (float)(r + 1) * (float)(i % 7);
    CHECK(zen_allreduce(c, v, v, N, ZEN_F32, ZEN_SUM) == ZEN_OK);
    for (int i = 0; i < N; i++)
        CHECK(v[i] == (float)(n * (n + 1) / 2) * (float)(i % 7));
    CHECK(report_fd >= 0 && stranger_pid > 0);
    struct pollfd pf = { .fd = report_fd, .events = POLLIN };
    char b = 0;
    CHECK(poll(&pf, 1, 10000) == 1 && read(report_fd, &b, 1) == 1);
    CHECK(b == 'C');
    int st = 0;
    CHECK(waitpid(stranger_pid, &st, 0) == stranger_pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (r < n - 1) {
        CHECK(refused_lines >= 1);
        CHECK(stranger_uid < 0 || other_user_lines >= 1);
    }
    return zen_barrier(c);
}

static void run_with_strangers(void)
{
    zt_job j = { ZEN_TRANSPORT_SHM, NRANKS, 0, 30, NULL };
    int status[64];
    int64_t t0 = zen_now_ns();
    zt_job_run(&j, sc_job, NULL, status);
    double secs = (double)(zen_now_ns() - t0) / 1e9;
    fprintf(stderr, "job with strangers took %.2f s\n", secs);
    assert_true(zt_job_all_ok(&j, status));
    /* the strangers cost no waiting (before, the silent one held a rank for the whole 30 s) */
    assert_true(secs < 15);
}

static void test_strangers_during_handover(void **state)
{
    (void)state;
    stranger_uid = stranger_gid = -1;
    stall_rank_from = -1;
    zen__shm_boot_test_hook = hook;
    run_with_strangers();
    zen__shm_boot_test_hook = NULL;
}

static void test_other_user_refused(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "test_other_user_refused: skipped, needs root to setuid a stranger\n");
        skip();
    }
    struct passwd *pw = getpwnam("nobody");
    if (!pw || pw->pw_uid == 0) {
        fprintf(stderr, "test_other_user_refused: skipped, no user nobody\n");
        skip();
    }
    stranger_uid = (int)pw->pw_uid;
    stranger_gid = (int)pw->pw_gid;
    stall_rank_from = -1;
    zen__shm_boot_test_hook = hook;
    run_with_strangers();
    zen__shm_boot_test_hook = NULL;
    stranger_uid = stranger_gid = -1;
}

static zen_status sc_nothing(zen_comm *c, void *arg)
{
    (void)c;
    (void)arg;
    return ZEN_OK;
}

/* Run an NRANKS shm job whose hand-over stalls as *stall says (stall_rank_from or
 * stall_rank_only set to rank), with a 2 s timeout and a still-waiting line every 0.5 s; the
 * hook records the ranks' lines in shared. */
static void run_stalled_job(int *stall, int rank, int status[])
{
    memset(shared, 0, sizeof *shared);
    *stall = rank;
    zen__shm_boot_test_hook = hook;
    setenv("ZEN_WAIT_REPORT_S", "0.5", 1);
    zt_job j = { ZEN_TRANSPORT_SHM, NRANKS, 0, 2, NULL };
    zt_job_run(&j, sc_nothing, NULL, status);
    unsetenv("ZEN_WAIT_REPORT_S");
    zen__shm_boot_test_hook = NULL;
    *stall = -1;
}

/* Ranks 2 and 3 sleep 5 s before handing over, the timeout is 2 s: ranks 0 and 1 fail naming
 * both of them, and no other rank. While they wait they say every ZEN_WAIT_REPORT_S (0.5 s
 * here) whom they wait for. */
static void test_timeout_names_every_missing_rank(void **state)
{
    (void)state;
    int status[64];
    run_stalled_job(&stall_rank_from, 2, status);
    for (int r = 0; r < 2; r++)
        assert_true(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) != 0);
    int n = atomic_load(&shared->n);
    assert_true(n >= 2);
    int named_both = 0;
    for (int k = 0; k < n && k < NRANKS; k++) {
        fprintf(stderr, "timeout line: %s\n", shared->line[k]);
        if (strstr(shared->line[k], "ranks 2, 3 never handed over"))
            named_both++;
        assert_null(strstr(shared->line[k], "rank 0 never"));
        assert_null(strstr(shared->line[k], "rank 1 never"));
    }
    assert_true(named_both >= 2); /* rank 0 and rank 1 */
    assert_true(atomic_load(&shared->waiting) >= 2);
}

/* Rank 1 sleeps 3 s before its hand-over, the timeout is 2 s: ranks 2 and 3, which connect to
 * it and wait for its answer, say every ZEN_WAIT_REPORT_S (0.5 s) that they wait for rank 1 and
 * at the deadline that rank 1 never answered; every rank but rank 1 fails. */
static void test_connect_side_says_whom_it_waits_for(void **state)
{
    (void)state;
    int status[64];
    run_stalled_job(&stall_rank_only, 1, status);
    for (int r = 0; r < NRANKS; r++)
        if (r != 1)
            assert_true(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) != 0);
    assert_true(atomic_load(&shared->answering) >= 2);
    assert_true(atomic_load(&shared->unanswered) >= 2);
}

int main(void)
{
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strangers_during_handover),
        cmocka_unit_test(test_other_user_refused),
        cmocka_unit_test(test_timeout_names_every_missing_rank),
        cmocka_unit_test(test_connect_side_says_whom_it_waits_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
