/*
 * The tcp transport with real processes. Each cmocka test starts N copies of this executable
 * ("--rank-main SCENARIO") with the rank environment set, and checks their exit statuses. A rank
 * checks its own expectations (data against a naive local reference, error codes and messages)
 * and exits 0 when they hold. Also `zen launch` (through $ZEN_BIN) and a loopback bandwidth
 * probe (scenario "bw", run by hand: zen launch -n 2 -- test_tcp --rank-main bw).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tools/free_port.h"
#include "coll/comm_internal.h"
#include "coll_matrix.h"
#include "common/clock.h"
#include "testutil.h"

/* ------------------------------------------------------------------ rank side */

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: rank %s: check failed: %s (last error: %s)\n", __FILE__, \
                    __LINE__, getenv("ZEN_RANK"), #cond, c ? zen_comm_last_error(c) : "");   \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

static unsigned char pattern(int rank, size_t i, int salt)
{
    return (unsigned char)((size_t)rank * 131 + i * 7 + (size_t)salt * 17 + (i >> 9));
}

static int sc_p2p(zen_comm *c)
{
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    static const size_t sizes[] = { 0, 1, 7, 4096, 100003, (1u << 20) + 3 };
    unsigned char *sb = malloc((1u << 20) + 3), *rb = malloc((1u << 20) + 3);
    CHECK(sb && rb);
    for (int k = 0; k < (int)(sizeof sizes / sizeof sizes[0]); k++) {
        size_t len = sizes[k];
        for (size_t i = 0; i < len; i++)
            sb[i] = pattern(r, i, k);
        memset(rb, 0, len);
        zen_request *rq = NULL;
        size_t got = 99;
        /* Even k: receive posted first (zero-copy path); odd k: message arrives unexpected. */
        if (k % 2 == 0)
            CHECK(zen_irecv(c, rb, len, prev, 100 + k, &rq) == ZEN_OK);
        CHECK(zen_send(c, sb, len, next, 100 + k) == ZEN_OK);
        if (k % 2 == 1) {
            CHECK(zen_barrier(c) == ZEN_OK);
            CHECK(zen_irecv(c, rb, len, prev, 100 + k, &rq) == ZEN_OK);
        }
        CHECK(zen_request_wait(rq, -1, &got) == ZEN_OK);
        zen_request_destroy(rq);
        CHECK(got == len);
        for (size_t i = 0; i < len; i++)
            CHECK(rb[i] == pattern(prev, i, k));
    }
    /* Order: 300 messages on one tag, and interleaved on two tags, arrive in send order. */
    if (r == 0) {
        for (int i = 0; i < 300; i++) {
            for (int p = 1; p < n; p++) {
                CHECK(zen_send(c, &i, sizeof i, p, 7) == ZEN_OK);
                int j = -i;
                CHECK(zen_send(c, &j, sizeof j, p, 8) == ZEN_OK);
            }
        }
    } else {
        for (int i = 0; i < 300; i++) {
            int v = -1;
            CHECK(zen_recv(c, &v, sizeof v, 0, 7, NULL) == ZEN_OK && v == i);
        }
        for (int i = 0; i < 300; i++) {
            int v = 1;
            CHECK(zen_recv(c, &v, sizeof v, 0, 8, NULL) == ZEN_OK && v == -i);
        }
    }
    /* Self-send. */
    int self_out = 4242 + r, self_in = 0;
    CHECK(zen_send(c, &self_out, sizeof self_out, r, 9) == ZEN_OK);
    CHECK(zen_recv(c, &self_in, sizeof self_in, r, 9, NULL) == ZEN_OK && self_in == self_out);
    /* Truncation: a message longer than the posted receive fails it naming the sender; the
     * bytes are discarded and the stream stays usable. */
    if (r == 1) {
        double big[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
        CHECK(zen_send(c, big, sizeof big, 0, 10) == ZEN_OK);
        CHECK(zen_send(c, big, sizeof big, 0, 11) == ZEN_OK);
    } else if (r == 0) {
        double small[2];
        zen_request *rq = NULL;
        CHECK(zen_irecv(c, small, sizeof small, 1, 10, &rq) == ZEN_OK);
        CHECK(zen_request_wait(rq, -1, NULL) == ZEN_EPROTO);
        zen_request_destroy(rq);
        CHECK(strstr(zen_comm_last_error(c), "rank 1") != NULL);
        /* The unexpected path: the message is already buffered when the receive is posted. */
        zen__sleep_ns(50 * 1000000);
        CHECK(zen_recv(c, small, sizeof small, 1, 11, NULL) == ZEN_EPROTO);
        double again[8];
        CHECK(zen_send(c, again, 0, 1, 12) == ZEN_OK);
    }
    if (r == 1) {
        CHECK(zen_recv(c, NULL, 0, 0, 12, NULL) == ZEN_OK);
    }
    CHECK(zen_barrier(c) == ZEN_OK);
    free(sb);
    free(rb);
    return 0;
}

/* 32 MiB both ways at once: the blocking writes only finish because readers always drain. */
static int sc_big(zen_comm *c)
{
    int r = zen_comm_rank(c), peer = 1 - r;
    size_t len = (size_t)32 << 20;
    unsigned char *sb = malloc(len), *rb = malloc(len);
    CHECK(sb && rb);
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < len; i++)
            sb[i] = pattern(r, i, round);
        zen_request *rq = NULL;
        /* Round 0: rank 0 posts first, rank 1 late (unexpected); round 1: both post first. */
        if (round == 1 || r == 0)
            CHECK(zen_irecv(c, rb, len, peer, 1, &rq) == ZEN_OK);
        CHECK(zen_send(c, sb, len, peer, 1) == ZEN_OK);
        if (!rq)
            CHECK(zen_irecv(c, rb, len, peer, 1, &rq) == ZEN_OK);
        size_t got = 0;
        CHECK(zen_request_wait(rq, -1, &got) == ZEN_OK);
        zen_request_destroy(rq);
        CHECK(got == len);
        for (size_t i = 0; i < len; i++)
            CHECK(rb[i] == pattern(peer, i, round));
    }
    free(sb);
    free(rb);
    return 0;
}

static double value_of(int rank, size_t i)
{
    return (double)((rank * 7 + (int)(i % 1000)) % 23) - 11;
}

/* Collectives over tcp against a naive local reference (integer-valued doubles: exact). */
static int sc_coll(zen_comm *c)
{
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    static const size_t counts[] = { 0, 1, 7, 1000, 1u << 20 };
    for (int k = 0; k < (int)(sizeof counts / sizeof counts[0]); k++) {
        size_t cnt = counts[k];
        double *in = malloc((cnt ? cnt : 1) * sizeof *in);
        double *out = malloc((cnt ? cnt : 1) * sizeof *out);
        CHECK(in && out);
        for (size_t i = 0; i < cnt; i++)
            in[i] = value_of(r, i);
        CHECK(zen_allreduce(c, in, out, cnt, ZEN_F64, ZEN_SUM) == ZEN_OK);
        for (size_t i = 0; i < cnt; i++) {
            double want = 0;
            for (int p = 0; p < n; p++)
                want += value_of(p, i);
            CHECK(out[i] == want);
        }
        free(in);
        free(out);
        if (cnt > 1000)
            continue;
        int32_t *mine = malloc((cnt ? cnt : 1) * sizeof *mine);
        int32_t *all = malloc((cnt ? cnt : 1) * (size_t)n * sizeof *all);
        CHECK(mine && all);
        for (size_t i = 0; i < cnt; i++)
            mine[i] = (int32_t)(r * 100000 + (int)i);
        CHECK(zen_allgather(c, mine, all, cnt, ZEN_I32) == ZEN_OK);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < cnt; i++)
                CHECK(all[(size_t)p * cnt + i] == (int32_t)(p * 100000 + (int)i));
        free(mine);
        free(all);
    }
    CHECK(zen_barrier(c) == ZEN_OK);
    return 0;
}

/* Loop of small allgathers; ZEN_FAULT_RANK / ZEN_TEST_SIGKILL_RANK dies mid-way. Survivors must
 * fail with an error naming the dead rank (not hang, not blame someone else). */
static int sc_die(zen_comm *c)
{
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    int dead = atoi(getenv("ZT_DEAD_RANK") ? getenv("ZT_DEAD_RANK") : "1");
    int sigkill = getenv("ZT_SIGKILL") != NULL;
    int32_t mine[64], all[64 * 16];
    zen_status st = ZEN_OK;
    for (int it = 0; it < 40 && st == ZEN_OK; it++) {
        if (sigkill && r == dead && it == 3)
            raise(SIGKILL);
        for (int i = 0; i < 64; i++)
            mine[i] = r + it + i;
        st = zen_allgather(c, mine, all, 64, ZEN_I32);
        if (st == ZEN_OK)
            for (int p = 0; p < n; p++)
                CHECK(all[p * 64 + 5] == p + it + 5);
    }
    CHECK(st != ZEN_OK);
    if (r != dead) {
        char want[32];
        snprintf(want, sizeof want, "rank %d", dead);
        const char *e = zen_comm_last_error(c);
        CHECK(st == ZEN_EPEER || st == ZEN_EABORTED || st == ZEN_EPROTO);
        CHECK(strstr(e, want) != NULL);
        fprintf(stderr, "rank %d failed as expected: %s\n", r, e);
    }
    return 0;
}

/* Garbage on the wire: the receiver fails with ZEN_EPROTO naming the sender. */
static int sc_garbage(zen_comm *c)
{
    int r = zen_comm_rank(c);
    if (r == 1) {
        static const char junk[40] = "GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE";
        zen_transport *t = c->transport;
        CHECK(t->ops->send_raw(t, 0, junk, sizeof junk) == ZEN_OK);
        /* Rank 0 drops the connection after the protocol error: this receive must end. */
        int v = 0;
        CHECK(zen_recv(c, &v, sizeof v, 0, 3, NULL) == ZEN_EPEER);
        CHECK(strstr(zen_comm_last_error(c), "rank 0") != NULL);
    } else {
        int v = 0;
        CHECK(zen_recv(c, &v, sizeof v, 1, 3, NULL) == ZEN_EPROTO);
        CHECK(strstr(zen_comm_last_error(c), "rank 1") != NULL);
    }
    return 0;
}

/* A peer that stops in the middle of a frame: the receiver fails with ZEN_ETIMEDOUT naming it
 * (the reader's stall limit, or the receive's own deadline) and nothing hangs, not even freeing
 * the receive the reader was filling. */
static int sc_stall(zen_comm *c)
{
    int r = zen_comm_rank(c);
    if (r == 1) {
        unsigned char frame[24 + 10];
        memset(frame, 0, sizeof frame);
        const unsigned char head[8] = { 'Z', 'E', 'N', 'F', 1, 0, 1, 0 };
        memcpy(frame, head, sizeof head);
        uint64_t tag = zen__comm_user_tag(c, 5);
        for (int i = 0; i < 8; i++) {
            frame[8 + i] = (unsigned char)(tag >> (8 * i));
            frame[16 + i] = (unsigned char)(i == 0 ? 100 : 0); /* announces 100 bytes */
        }
        zen_transport *t = c->transport;
        CHECK(t->ops->send_raw(t, 0, frame, sizeof frame) == ZEN_OK);
        /* Stop, as a process stuck in the middle of a frame is: leaving would end the frame with
         * an end of stream instead of a stall, and a live process keeps sending heartbeats
         * (which would land in the payload: only a raw write can split a frame). The driver
         * kills this rank once rank 0 is done. */
        raise(SIGSTOP);
        return 0;
    } else {
        char buf[100];
        CHECK(zen_recv(c, buf, sizeof buf, 1, 5, NULL) == ZEN_ETIMEDOUT);
        CHECK(strstr(zen_comm_last_error(c), "rank 1") != NULL);
    }
    return 0;
}

/* A peer that stops reading (SIGSTOP): a big send fills the socket buffers, then fails with
 * ZEN_ETIMEDOUT naming the peer after the timeout instead of blocking forever. */
static int sc_sendstall(zen_comm *c)
{
    if (zen_comm_rank(c) == 1) {
        raise(SIGSTOP);
        return 0; /* the driver kills this rank while it is stopped */
    }
    size_t len = (size_t)128 << 20;
    char *buf = calloc(1, len);
    CHECK(buf);
    zen__sleep_ns(100 * 1000000);
    CHECK(zen_send(c, buf, len, 1, 1) == ZEN_ETIMEDOUT);
    CHECK(strstr(zen_comm_last_error(c), "to rank 1 made no progress") != NULL);
    free(buf);
    return 0;
}

/* zen launch: rank 1 fails on purpose; the others expect the failure and succeed. */
static int sc_fail1(zen_comm *c)
{
    if (zen_comm_rank(c) == 1)
        return 3;
    CHECK(zen_barrier(c) != ZEN_OK);
    return 0;
}

/* Loopback bandwidth: rank 0 sends, rank 1 receives into a posted buffer and acknowledges. */
static int sc_bw(zen_comm *c)
{
    int r = zen_comm_rank(c);
    size_t maxlen = (size_t)256 << 20;
    char *buf = malloc(maxlen);
    CHECK(buf);
    memset(buf, r, maxlen);
    for (size_t len = 8; len <= maxlen; len *= len < 4096 ? 512 : 4) {
        int iters = len >= ((size_t)64 << 20) ? 8 : len <= 65536 ? 2000 : 20;
        int64_t t0 = 0;
        for (int it = -1; it < iters; it++) {
            if (it == 0)
                t0 = zen_now_ns();
            if (r == 0) {
                CHECK(zen_send(c, buf, len, 1, 1) == ZEN_OK);
                CHECK(zen_recv(c, NULL, 0, 1, 2, NULL) == ZEN_OK);
            } else {
                CHECK(zen_recv(c, buf, len, 0, 1, NULL) == ZEN_OK);
                CHECK(zen_send(c, NULL, 0, 0, 2) == ZEN_OK);
            }
        }
        double s = (double)(zen_now_ns() - t0) / 1e9;
        if (r == 0)
            printf("tcp loopback p2p %10zu bytes: %8.3f GB/s  (%.1f us per message)\n", len,
                   (double)len * iters / s / 1e9, s / iters * 1e6);
    }
    free(buf);
    return 0;
}

/* Voluntary context switches of this process's tcp heartbeat thread (there is one per tcp
 * transport, and this process has one); -1 when it is not found. */
static long beat_thread_switches(void)
{
    DIR *d = opendir("/proc/self/task");
    long found = -1;
    struct dirent *e;
    while (d && found < 0 && (e = readdir(d)) != NULL) {
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        int is_beat = f && fgets(line, sizeof line, f) && strcmp(line, "zen-tcp-beat\n") == 0;
        if (f)
            fclose(f);
        if (!is_beat)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &found) == 1)
                break;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

/* An idle job costs the heartbeat thread four wake-ups per beat (1 s here): about 8 in 2 s.
 * Each look is one sleep, so its voluntary context switches count the looks; the former rule
 * (a look every 50 ms whatever the beat) made 40. At least 2: the thread still looks. */
static int sc_idle(zen_comm *c)
{
    CHECK(zen_barrier(c) == ZEN_OK);
    /* The thread names itself once it first runs, which on a loaded host can be after the
     * barrier: wait for it (at most 10 s). */
    long before = beat_thread_switches();
    for (int i = 0; i < 1000 && before < 0; i++) {
        zen__sleep_ns(10 * 1000000);
        before = beat_thread_switches();
    }
    CHECK(before >= 0);
    zen__sleep_ns(2 * 1000000000LL);
    long looks = beat_thread_switches() - before;
    if (looks < 2 || looks > 16)
        fprintf(stderr, "rank %d: heartbeat thread woke %ld times in 2 s\n", zen_comm_rank(c),
                looks);
    CHECK(looks >= 2 && looks <= 16);
    CHECK(zen_barrier(c) == ZEN_OK);
    return 0;
}

struct scenario {
    const char *name;
    int (*fn)(zen_comm *c);
};

static const struct scenario scenarios[] = {
    { "p2p", sc_p2p },
    { "big", sc_big },
    { "coll", sc_coll },
    { "die", sc_die },
    { "garbage", sc_garbage },
    { "stall", sc_stall },
    { "sendstall", sc_sendstall },
    { "fail1", sc_fail1 },
    { "bw", sc_bw },
    { "idle", sc_idle },
};

static char captured[8192];

static void capture_sink(zen_log_level level, const char *subsys, const char *line, void *user)
{
    (void)level;
    (void)subsys;
    (void)user;
    size_t used = strlen(captured);
    snprintf(captured + used, sizeof captured - used, "%s\n", line);
    fprintf(stderr, "%s\n", line);
}

/* A world where one rank never starts: creation fails on every rank that did, and rank 0's
 * error names the missing rank. */
static int rank_missing(void)
{
    zen_comm *c = NULL;
    zen_log_set_sink(capture_sink, NULL);
    setenv("ZEN_WAIT_REPORT_S", "0.5", 1); /* the 2 s wait says whom it waits for */
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.transport = ZEN_TRANSPORT_TCP;
    zen_status st = zen_comm_create(&o, &c);
    CHECK(st != ZEN_OK && c == NULL);
    if (atoi(getenv("ZEN_RANK")) == 1) {
        CHECK(strstr(captured, "registered; still waiting for rank 0's rank table") != NULL);
        /* rank 0's verdict reaches the ranks that registered: they name the missing rank too */
        CHECK(st == ZEN_ETIMEDOUT);
        CHECK(strstr(captured, "rank 1: tcp rendezvous: 2 of 3 ranks arrived (registered with "
                               "rank 0) within") != NULL);
        CHECK(strstr(captured, "missing: rank 2 (") != NULL);
    }
    if (atoi(getenv("ZEN_RANK")) == 0) {
        CHECK(strstr(captured, "still waiting for rank(s) 2 to register with rank 0") != NULL);
        CHECK(st == ZEN_ETIMEDOUT);
        CHECK(strstr(captured, "2 of 3 ranks arrived (registered with rank 0 on port") != NULL);
        CHECK(strstr(captured, "missing: rank 2") != NULL);
    }
    return 0;
}

/* Rank 1 thinks the world has 3 ranks, rank 0 two: rank 1 learns it from rank 0's answer and
 * fails at once. With a job secret rank 1 is a proven member of the job, so
 * rank 0 fails at once naming the mismatch; without one anybody could have sent it, so rank 0
 * only drops it and quotes it when it times out. */
static int world_mismatch(void)
{
    zen_comm *c = NULL;
    zen_log_set_sink(capture_sink, NULL);
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.transport = ZEN_TRANSPORT_TCP;
    zen_status st = zen_comm_create(&o, &c);
    CHECK(st != ZEN_OK && c == NULL);
    if (atoi(getenv("ZEN_RANK")) == 0) {
        CHECK(st == (getenv("ZEN_JOB_SECRET") ? ZEN_EMISMATCH : ZEN_ETIMEDOUT));
        CHECK(strstr(captured, "rank 1 registered with world size 3, but rank 0 has 2") != NULL);
    } else {
        CHECK(st == ZEN_EMISMATCH);
        CHECK(strstr(captured, "rank 0 has world size 2, this rank 3") != NULL);
    }
    return 0;
}

static int rank_main(const char *name)
{
    if (strcmp(name, "missing") == 0)
        return rank_missing();
    if (strcmp(name, "mismatch") == 0)
        return world_mismatch();
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        if (strcmp(name, scenarios[i].name) != 0)
            continue;
        zen_comm *c = NULL;
        zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
        o.transport = ZEN_TRANSPORT_TCP;
        zen_status st = zen_comm_create(&o, &c);
        if (st != ZEN_OK) {
            fprintf(stderr, "rank %s: zen_comm_create: %s\n", getenv("ZEN_RANK"),
                    zen_status_name(st));
            return 1;
        }
        int rc = scenarios[i].fn(c);
        if (rc != 0)
            zen_comm_abort(c);
        zen_comm_destroy(c);
        return rc;
    }
    fprintf(stderr, "unknown scenario %s\n", name);
    return 1;
}

/* ------------------------------------------------------------------ driver side */

static char self_path[4096];

/* A free rendezvous port (tools/free_port.c, shared with `zen launch`). */
static int pick_port(void)
{
    int port = zen_free_port();
    if (port < 0)
        fail_msg("no free port found");
    return port;
}

struct job {
    const char *scenario;
    int world; /* ZEN_WORLD_SIZE */
    int spawn; /* ranks actually started (< world: the others never show up) */
    const char *timeout_s;
    const char *fault; /* ZEN_FAULT or NULL */
    const char *extra; /* "NAME=VALUE" or NULL */
    int rank1_world;   /* > 0: rank 1 believes in this world size instead */
    int kill_rest;     /* SIGKILL ranks > 0 once rank 0 has exited */
};

/* Start the ranks of job, wait (at most 120 s, then SIGKILL), store wait statuses. */
static void run_job(const struct job *j, int *status)
{
    int port = pick_port();
    pid_t pids[16];
    for (int r = 0; r < j->spawn; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            char v[32];
            snprintf(v, sizeof v, "%d", r);
            setenv("ZEN_RANK", v, 1);
            snprintf(v, sizeof v, "%d", j->world);
            setenv("ZEN_WORLD_SIZE", v, 1);
            snprintf(v, sizeof v, "%d", port);
            setenv("ZEN_MASTER_PORT", v, 1);
            setenv("ZEN_MASTER_ADDR", "127.0.0.1", 1);
            setenv("ZEN_TIMEOUT_S", j->timeout_s ? j->timeout_s : "30", 1);
            if (j->fault)
                setenv("ZEN_FAULT", j->fault, 1);
            else
                unsetenv("ZEN_FAULT");
            if (j->extra)
                putenv((char *)j->extra);
            if (r == 1 && j->rank1_world > 0) {
                snprintf(v, sizeof v, "%d", j->rank1_world);
                setenv("ZEN_WORLD_SIZE", v, 1);
            }
            execl(self_path, self_path, "--rank-main", j->scenario, (char *)NULL);
            _exit(127);
        }
    }
    time_t give_up = time(NULL) + 120;
    for (int r = 0; r < j->spawn; r++) {
        if (r == 1 && j->kill_rest)
            for (int k = 1; k < j->spawn; k++)
                kill(pids[k], SIGKILL);
        for (;;) {
            pid_t w = waitpid(pids[r], &status[r], WNOHANG);
            if (w == pids[r])
                break;
            if (time(NULL) > give_up) {
                fprintf(stderr, "%s: rank %d hangs; killing it\n", j->scenario, r);
                kill(pids[r], SIGKILL);
            }
            zen__sleep_ns(5 * 1000000);
        }
    }
}

static void expect_all_ok(const struct job *j, int skip)
{
    int status[16];
    run_job(j, status);
    for (int r = 0; r < j->spawn; r++) {
        if (r == skip)
            continue;
        if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0)
            fprintf(stderr, "%s: rank %d of %d: wait status 0x%x\n", j->scenario, r, j->world,
                    status[r]);
        assert_true(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0);
    }
}

static void test_p2p(void **state)
{
    (void)state;
    struct job j = { "p2p", 3, 3, NULL, NULL, NULL, 0, 0 };
    expect_all_ok(&j, -1);
}

static void test_big_both_ways(void **state)
{
    (void)state;
    struct job j = { "big", 2, 2, NULL, NULL, NULL, 0, 0 };
    expect_all_ok(&j, -1);
}

/* ZEN_TIMEOUT_S=inf is "no deadline": the ns conversion saturates instead of overflowing into a
 * negative stall limit that failed every message read in more than one piece. */
static void test_big_infinite_timeout(void **state)
{
    (void)state;
    const struct job j = { .scenario = "big", .world = 2, .spawn = 2, .timeout_s = "inf" };
    expect_all_ok(&j, -1);
}

static void test_collectives(void **state)
{
    (void)state;
    struct job j = { "coll", 3, 3, NULL, NULL, NULL, 0, 0 };
    expect_all_ok(&j, -1);
}

/*
 * A zt_runner for the shared collective matrix: fork (no exec, so fn and arg stay valid) n
 * processes that each create a tcp communicator and run fn; every one must exit 0.
 */
static void tcp_fork_runner(int n, zen_rank_fn fn, void *arg)
{
    zt_run_tcp_forked(n, NULL, NULL, fn, arg, 240);
}

/* The default heartbeat (1 s beat) with the job idle: the beat thread sleeps a quarter beat. */
static void test_idle_heartbeat_wakeups(void **state)
{
    (void)state;
    struct job j = { "idle", 2, 2, "30", NULL, "ZEN_HEARTBEAT_S=10", 0, 0 };
    expect_all_ok(&j, -1);
}

static void test_coll_matrix_tcp(void **state)
{
    (void)state;
    static const int sizes[] = { 1, 2, 3, 4, 5, 8 };
    zt_coll_matrix_env();
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        zt_coll_matrix(tcp_fork_runner, sizes[i], ZT_COLL_ALL);
    zt_coll_matrix(tcp_fork_runner, 3, ZT_COLL_LARGE);
}

static void test_fault_kill(void **state)
{
    (void)state;
    struct job j = { "die", 4, 4, "20", "rank=1,after=5,action=kill", "ZT_DEAD_RANK=1", 0, 0 };
    expect_all_ok(&j, -1);
}

static void test_sigkill(void **state)
{
    (void)state;
    struct job j = { "die", 4, 4, "20", NULL, "ZT_SIGKILL=1", 0, 0 };
    int status[16];
    putenv("ZT_DEAD_RANK=2");
    run_job(&j, status);
    unsetenv("ZT_DEAD_RANK");
    for (int r = 0; r < 4; r++) {
        if (r == 2)
            assert_true(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL);
        else
            assert_true(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0);
    }
}

static void test_fault_garbage_in_collective(void **state)
{
    (void)state;
    /* rank 2's 4th send is garbage: whoever reads it fails with EPROTO naming rank 2, the rest
     * learn through the abort cascade; every error names rank 2. */
    struct job j = { "die", 4, 4, "20", "rank=2,after=3,action=garbage", "ZT_DEAD_RANK=2", 0, 0 };
    expect_all_ok(&j, -1);
}

static void test_garbage(void **state)
{
    (void)state;
    struct job j = { "garbage", 2, 2, "20", NULL, NULL, 0, 0 };
    expect_all_ok(&j, -1);
}

static void test_stalled_frame(void **state)
{
    (void)state;
    /* heartbeat watching off: the reader's stall limit or the receive's deadline is what is
     * tested, not the watch (which could name the stopped rank first on a loaded host) */
    struct job j = { "stall", 2, 2, "1", NULL, "ZEN_HEARTBEAT_S=inf", 0, 1 };
    int status[16];
    run_job(&j, status);
    assert_true(WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 0);
    assert_true(WIFSIGNALED(status[1]) && WTERMSIG(status[1]) == SIGKILL);
}

static void test_send_to_stopped_peer(void **state)
{
    (void)state;
    /* heartbeat watching off: the send's own stall limit is what is tested, not the watch
     * (which could name the stopped rank first on a loaded host) */
    struct job j = { "sendstall", 2, 2, "1", NULL, "ZEN_HEARTBEAT_S=inf", 0, 1 };
    int status[16];
    run_job(&j, status);
    assert_true(WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 0);
    assert_true(WIFSIGNALED(status[1]) && WTERMSIG(status[1]) == SIGKILL);
}

static void test_missing_rank(void **state)
{
    (void)state;
    struct job j = { "missing", 3, 2, "2", NULL, NULL, 0, 0 };
    expect_all_ok(&j, -1);
}

static void test_world_size_mismatch(void **state)
{
    (void)state;
    struct job j = { "mismatch", 2, 2, "3", NULL, NULL, 3, 0 };
    expect_all_ok(&j, -1);
    struct job k = { "mismatch", 2, 2, "20", NULL, "ZEN_JOB_SECRET=s3cret-mismatch", 3, 0 };
    expect_all_ok(&k, -1);
}

/* Run $ZEN_BIN with args; return its wait status, stderr in err. */
static int run_zen(char *const *args, char *err, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execv(args[0], args);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    for (;;) {
        ssize_t n = read(fds[0], err + used, cap - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
        if (used + 1 >= cap)
            used = 0; /* keep reading, keep the tail */
    }
    err[used] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

static void test_launch(void **state)
{
    (void)state;
    char *zen = getenv("ZEN_BIN");
    if (!zen || access(zen, X_OK) != 0) {
        fprintf(stderr, "ZEN_BIN not set: skipping the zen launch test\n");
        skip();
    }
    char err[16384];
    setenv("ZEN_TIMEOUT_S", "20", 1);
    char *ok[] = { zen, "launch", "-n", "3", "--", self_path, "--rank-main", "p2p", NULL };
    int st = run_zen(ok, err, sizeof err);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "%s", err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    char *bad[] = { zen, "launch", "-n", "3", "--", self_path, "--rank-main", "fail1", NULL };
    st = run_zen(bad, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    assert_non_null(strstr(err, "zen launch: rank 1 exited with status 3"));

    char *noexec[] = { zen, "launch", "-n", "2", "--", "/nonexistent/zen-test-cmd", NULL };
    st = run_zen(noexec, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    assert_non_null(strstr(err, "exited with status 127"));

    char *usage1[] = { zen, "launch", NULL };
    st = run_zen(usage1, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    char *usage2[] = { zen, "launch", "-n", "2", NULL };
    st = run_zen(usage2, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    char *usage3[] = { zen, "launch", "-n", "0", "--", "true", NULL };
    st = run_zen(usage3, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    char *help[] = { zen, "launch", "--help", NULL };
    st = run_zen(help, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* A command killed by a signal counts as a failure too. */
    char *sig[] = { zen, "launch", "-n", "2", "--", "/bin/sh", "-c", "kill -9 $$", NULL };
    st = run_zen(sig, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    assert_non_null(strstr(err, "exited with status 137"));
}

/* SIGTERM to the launcher reaches every rank (each rank's trap reports it), and the launcher
 * exits 128 + 15. */
static void test_launch_forwards_sigterm(void **state)
{
    (void)state;
    char *zen = getenv("ZEN_BIN");
    if (!zen || access(zen, X_OK) != 0)
        skip();
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execl(zen, zen, "launch", "-n", "2", "--grace", "20", "--", "/bin/sh", "-c",
              "trap 'echo got-term >&2; exit 0' TERM; echo ready >&2; "
              "while :; do sleep 0.05; done",
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[4096];
    size_t used = 0;
    int signalled = 0;
    for (;;) {
        ssize_t n = read(fds[0], buf + used, sizeof buf - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
        buf[used] = '\0';
        const char *second = strstr(buf, "ready");
        if (!signalled && second && strstr(second + 1, "ready")) {
            kill(pid, SIGTERM);
            signalled = 1;
        }
        if (used + 1 >= sizeof buf)
            break;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(signalled);
    const char *first = strstr(buf, "got-term");
    assert_non_null(first);
    assert_non_null(strstr(first + 1, "got-term"));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--rank-main") == 0)
        return rank_main(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0)
        return 1;
    self_path[n] = '\0';
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p2p),
        cmocka_unit_test(test_big_both_ways),
        cmocka_unit_test(test_big_infinite_timeout),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_idle_heartbeat_wakeups),
        cmocka_unit_test(test_coll_matrix_tcp),
        cmocka_unit_test(test_fault_kill),
        cmocka_unit_test(test_sigkill),
        cmocka_unit_test(test_fault_garbage_in_collective),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_stalled_frame),
        cmocka_unit_test(test_send_to_stopped_peer),
        cmocka_unit_test(test_missing_rank),
        cmocka_unit_test(test_world_size_mismatch),
        cmocka_unit_test(test_launch),
        cmocka_unit_test(test_launch_forwards_sigterm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
