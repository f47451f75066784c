/*
 * The shm transport and mixed (shm + tcp) communicators with real processes (forked ranks):
 * point-to-point semantics against the tcp contract (FIFO per source and tag, unexpected
 * messages, too-long messages, large messages both ways through single copy and through the
 * ring), the kind and host topology a communicator reports, and failures: kill -9 of a rank in
 * the middle of allreduces (survivors fail fast naming it, nothing is left in /dev/shm), an abort
 * that wakes every waiter, and --transport shm refused across hosts. The collective matrix over
 * shm and mixed communicators is in test_shm_matrix.c.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zen/sparse.h>

#include "coll/comm_internal.h"
#include "common/clock.h"
#include "shm_jobs.h"
#include "testutil.h"
#include "transport/shm_internal.h"

#define CHECK(cond) ZT_CHECK(c, cond)

/* Pattern byte i of message (from, tag, len). */
static unsigned char pat(int from, int tag, size_t len, size_t i)
{
    return (unsigned char)(from * 31 + tag * 7 + (int)(len % 251) + (int)(i % 253));
}

static void fill(unsigned char *b, int from, int tag, size_t len)
{
    for (size_t i = 0; i < len; i++)
        b[i] = pat(from, tag, len, i);
}

static int check_msg(const unsigned char *b, int from, int tag, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (b[i] != pat(from, tag, len, i))
            return 0;
    return 1;
}

static const size_t sizes[] = { 0, 1, 8, 100, 4095, 65535, 65536, 200000, (size_t)3 << 20 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

/*
 * Every rank sends every size to every other rank with two tags, all before receiving anything
 * (so most arrive unexpected, and two ranks sending each other large messages at once must not
 * deadlock); then receives tag 2 before tag 1 (matching is by tag, not arrival order) and checks
 * each message's bytes. Then a message longer than the posted receive fails with ZEN_EPROTO.
 */
static zen_status sc_p2p(zen_comm *c, void *arg)
{
    (void)arg;
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    size_t maxlen = sizes[NSIZES - 1];
    unsigned char *buf = malloc(maxlen), *got = malloc(maxlen);
    CHECK(buf && got);
    zen_request *rq[2 * NSIZES * 16];
    int nrq = 0;
    /* pre-post half of the receives from the left neighbour: they land in posted buffers */
    unsigned char *posted[NSIZES];
    int left = (r + n - 1) % n;
    for (size_t k = 0; k < NSIZES; k++) {
        posted[k] = malloc(sizes[k] ? sizes[k] : 1);
        CHECK(posted[k]);
        CHECK(zen_irecv(c, posted[k], sizes[k], left, 1, &rq[nrq++]) == ZEN_OK);
    }
    for (int d = 1; d < n; d++) {
        int to = (r + d) % n;
        for (size_t k = 0; k < NSIZES; k++) {
            for (int tag = 1; tag <= 2; tag++) {
                fill(buf, r, tag, sizes[k]);
                CHECK(zen_send(c, buf, sizes[k], to, tag) == ZEN_OK);
            }
        }
    }
    for (int d = 1; d < n; d++) {
        int from = (r + n - d) % n;
        for (int tag = 2; tag >= 1; tag--) {
            for (size_t k = 0; k < NSIZES; k++) {
                if (tag == 1 && from == left)
                    continue; /* pre-posted */
                size_t len = 0;
                CHECK(zen_recv(c, got, maxlen, from, tag, &len) == ZEN_OK);
                CHECK(len == sizes[k]);
                CHECK(check_msg(got, from, tag, len));
            }
        }
    }
    for (int i = 0; i < nrq; i++) {
        size_t len = 0;
        CHECK(zen_request_wait(rq[i], 30, &len) == ZEN_OK);
        zen_request_destroy(rq[i]);
        CHECK(len == sizes[i] && check_msg(posted[i], left, 1, len));
        free(posted[i]);
    }
    /* too long for the receive: ZEN_EPROTO naming the sender, the stream stays usable */
    int right = (r + 1) % n;
    fill(buf, r, 9, 300000);
    CHECK(zen_send(c, buf, 300000, right, 9) == ZEN_OK);
    CHECK(zen_recv(c, got, 1000, left, 9, NULL) == ZEN_EPROTO);
    char want[32];
    snprintf(want, sizeof want, "rank %d", left);
    CHECK(strstr(zen_comm_last_error(c), want) != NULL);
    CHECK(zen_barrier(c) == ZEN_OK);
    free(buf);
    free(got);
    return ZEN_OK;
}

static void run_ok(zt_job *j, zen_rank_fn fn)
{
    int status[64];
    zt_job_run(j, fn, NULL, status);
    assert_true(zt_job_all_ok(j, status));
}

static void test_p2p_shm(void **state)
{
    (void)state;
    /* single copy forced on (the default measures it and may turn it off on this host), then
     * the default */
    zt_job j = { ZEN_TRANSPORT_SHM, 3, 0, 30, "ZEN_SHM_CMA=1" };
    run_ok(&j, sc_p2p);
    zt_job k = { ZEN_TRANSPORT_SHM, 2, 0, 30, NULL };
    run_ok(&k, sc_p2p);
}

static void test_p2p_shm_ring_only(void **state)
{
    (void)state;
    /* no single copy, the smallest ring: big messages wrap around it in many pieces */
    zt_job j = { ZEN_TRANSPORT_SHM, 3, 0, 30, "ZEN_SHM_CMA=0" };
    run_ok(&j, sc_p2p);
    zt_job k = { ZEN_TRANSPORT_SHM, 2, 0, 30, "ZEN_SHM_RING_KB=64" };
    run_ok(&k, sc_p2p);
}

/*
 * Many laps of the smallest ring: ranks 0 and 1 bounce messages of every small length (0..300
 * bytes, so records of 1..6 lines and pads at every line position) while a window of sends runs
 * ahead of the receives, which keeps the ring partly full and the producer re-reading head; every
 * message is checked byte by byte and by order (its sequence number is its tag).
 */
static zen_status sc_laps(zen_comm *c, void *arg)
{
    (void)arg;
    int r = zen_comm_rank(c), peer = 1 - r;
    unsigned char out[301], in[301];

    enum {
        N = 12000,
        AHEAD = 40
    };

    for (int i = 0; i < N + AHEAD; i++) {
        if (i < N) {
            size_t len = (size_t)(i * 37 + r) % 301;
            fill(out, r, i % 1000, len);
            CHECK(zen_send(c, out, len, peer, i % 1000) == ZEN_OK);
        }
        if (i >= AHEAD) {
            int k = i - AHEAD;
            size_t want = (size_t)(k * 37 + peer) % 301, len = 0;
            CHECK(zen_recv(c, in, sizeof in, peer, k % 1000, &len) == ZEN_OK);
            CHECK(len == want && check_msg(in, peer, k % 1000, len));
        }
    }
    return zen_barrier(c);
}

static void test_ring_laps(void **state)
{
    (void)state;
    zt_job j = { ZEN_TRANSPORT_SHM, 2, 0, 60, "ZEN_SHM_RING_KB=64" };
    run_ok(&j, sc_laps);
}

/* Pages of [p, p + len) that exist (mincore: in memory; an untouched shmem page has none). */
static size_t resident_pages(void *p, size_t len, size_t *pages)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page, got = 0;
    unsigned char *v = malloc(n);
    if (v && mincore(p, len, v) == 0)
        for (size_t i = 0; i < n; i++)
            got += v[i] & 1;
    free(v);
    *pages = n;
    return got;
}

/*
 * Right after setup, before any message: with ZEN_SHM_PREFAULT=1 (and by default at 3
 * processes) every page of this process's segment and of the ring it produces into in each
 * peer's segment exists; with 0 the data pages are left to the first messages (a control that
 * the check can see the difference). arg: 1 all resident expected, 0 some missing expected.
 */
static zen_status sc_prefault(zen_comm *c, void *arg)
{
    int want_all = *(const int *)arg;
    shm_state *s = (shm_state *)c->transport;
    size_t pages = 0, have = resident_pages(s->seg, s->seg_bytes, &pages), all = pages;
    for (int p = 0; p < zen_comm_size(c); p++) {
        if (p == zen_comm_rank(c))
            continue;
        size_t n = 0;
        have += resident_pages(s->peers[p].out_data, s->ring_bytes, &n);
        all += n;
    }
    CHECK(want_all ? have == all : have < all / 2);
    return zen_barrier(c);
}

static void test_prefault(void **state)
{
    (void)state;
    int status[8], yes = 1, no = 0;
    zt_job on = { ZEN_TRANSPORT_SHM, 3, 0, 30, "ZEN_SHM_PREFAULT=1" };
    zt_job_run(&on, sc_prefault, &yes, status);
    assert_true(zt_job_all_ok(&on, status));
    zt_job dflt = { ZEN_TRANSPORT_SHM, 3, 0, 30, NULL };
    zt_job_run(&dflt, sc_prefault, &yes, status);
    assert_true(zt_job_all_ok(&dflt, status));
    zt_job off = { ZEN_TRANSPORT_SHM, 3, 0, 30, "ZEN_SHM_PREFAULT=0" };
    zt_job_run(&off, sc_prefault, &no, status);
    assert_true(zt_job_all_ok(&off, status));
}

static void test_p2p_mixed(void **state)
{
    (void)state;
    zt_job j = { ZEN_TRANSPORT_MIXED, 4, 2, 30, NULL };
    run_ok(&j, sc_p2p);
}

/* The kind, the local rank/size and the hosts the transport reports. */
static zen_status sc_topology(zen_comm *c, void *arg)
{
    int per = getenv("ZT_PER")[0] - '0';
    (void)arg;
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    int hosts = (n + per - 1) / per;
    zen_transport_kind want = hosts == 1 ? ZEN_TRANSPORT_SHM
                              : per == 1 ? ZEN_TRANSPORT_TCP
                                         : ZEN_TRANSPORT_MIXED;
    CHECK(zen_comm_transport(c) == want);
    if (want == ZEN_TRANSPORT_TCP)
        return ZEN_OK; /* one rank per host: plain tcp, which knows no hosts */
    int local = n - (r / per) * per < per ? n - (r / per) * per : per;
    CHECK(zen_comm_local_size(c) == local);
    CHECK(zen_comm_local_rank(c) == r % per);
    for (int p = 0; p < n; p++)
        CHECK(zen__transport_host(c->transport, p) == p / per);
    float x = (float)r, sum = 0;
    CHECK(zen_allreduce(c, &x, &sum, 1, ZEN_F32, ZEN_SUM) == ZEN_OK);
    CHECK(sum == (float)(n * (n - 1) / 2));
    return ZEN_OK;
}

static void test_topology(void **state)
{
    (void)state;
    static const int cases[][2] = { { 3, 3 }, { 4, 2 }, { 5, 2 }, { 3, 1 } }; /* n, per host */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static char env[32];
        snprintf(env, sizeof env, "ZT_PER=%d", cases[i][1]);
        zt_job j = { ZEN_TRANSPORT_MIXED, cases[i][0], cases[i][1], 30, env };
        run_ok(&j, sc_topology);
    }
}

/* --transport shm with ranks on two hosts: creation fails on every rank (never hangs). */
static zen_status sc_never(zen_comm *c, void *arg)
{
    (void)arg;
    CHECK(0);
    return ZEN_OK;
}

static void test_shm_across_hosts_refused(void **state)
{
    (void)state;
    zt_job j = { ZEN_TRANSPORT_SHM, 4, 2, 10, NULL };
    int status[64];
    zt_job_run(&j, sc_never, NULL, status);
    for (int r = 0; r < j.n; r++)
        assert_true(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 1);
}

/* Names in /dev/shm, one per line, into out. */
static void list_dev_shm(char *out, size_t cap)
{
    out[0] = '\0';
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    size_t used = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        int k = snprintf(out + used, cap - used, "%s\n", e->d_name);
        if (k < 0 || (size_t)k >= cap - used)
            break;
        used += (size_t)k;
    }
    closedir(d);
}

/* Entries of after that are not in before (ignoring Open MPI's own segments: other jobs may
 * run mpirun on this host at the same time). */
static int new_entries(const char *before, const char *after)
{
    int fresh = 0;
    for (const char *p = after; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char name[300];
        snprintf(name, sizeof name, "\n%.*s\n", (int)len, p);
        char wrapped[1 << 16];
        snprintf(wrapped, sizeof wrapped, "\n%s", before);
        if (!strstr(wrapped, name) && !strstr(name, "vader") && !strstr(name, "ompi") &&
            !strstr(name, "sm_segment")) {
            fprintf(stderr, "new in /dev/shm: %.*s\n", (int)len, p);
            fresh++;
        }
        p = nl ? nl + 1 : p + len;
    }
    return fresh;
}

/*
 * Allreduces of 1 Mi floats in a loop; rank ZT_DEAD kills itself (SIGKILL) in the middle of the
 * 3rd. Every survivor must fail well before the 30 s communicator timeout, with an error naming
 * the dead rank.
 */
static zen_status sc_die(zen_comm *c, void *arg)
{
    (void)arg;
    int r = zen_comm_rank(c);
    int dead = atoi(getenv("ZT_DEAD"));
    size_t count = (size_t)1 << 20;
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    CHECK(x && y);
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(i % 7);
    zen_status st = ZEN_OK;
    int64_t t0 = 0;
    for (int it = 0; it < 50 && st == ZEN_OK; it++) {
        if (it == 3)
            t0 = zen_now_ns();
        if (it == 3 && r == dead) {
            zen__sleep_ns(20 * 1000000); /* the others are inside the allreduce by now */
            raise(SIGKILL);
        }
        st = zen_allreduce(c, x, y, count, ZEN_F32, ZEN_SUM);
    }
    double waited = (double)(zen_now_ns() - t0) / 1e9;
    CHECK(st == ZEN_EPEER || st == ZEN_EABORTED || st == ZEN_ETIMEDOUT);
    CHECK(st != ZEN_ETIMEDOUT);
    char want[32];
    snprintf(want, sizeof want, "rank %d", dead);
    fprintf(stderr, "rank %d failed after %.2f s as expected: %s\n", r, waited,
            zen_comm_last_error(c));
    CHECK(strstr(zen_comm_last_error(c), want) != NULL);
    CHECK(waited < 15); /* detection, not the 30 s timeout */
    free(x);
    free(y);
    return ZEN_OK;
}

static void kill_during_allreduce(zen_transport_kind kind, int n, int per, const char *dead_env,
                                  int dead)
{
    static char before[1 << 15], after[1 << 15];
    list_dev_shm(before, sizeof before);
    putenv((char *)dead_env);
    zt_job j = { kind, n, per, 30, NULL };
    int status[64];
    zt_job_run(&j, sc_die, NULL, status);
    for (int r = 0; r < n; r++) {
        if (r == dead) {
            assert_true(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL);
        } else {
            if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0)
                fprintf(stderr, "survivor %d: wait status 0x%x\n", r, status[r]);
            assert_true(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0);
        }
    }
    list_dev_shm(after, sizeof after);
    assert_int_equal(new_entries(before, after), 0);
}

static void test_sigkill_shm(void **state)
{
    (void)state;
    kill_during_allreduce(ZEN_TRANSPORT_SHM, 4, 0, "ZT_DEAD=2", 2);
}

static void test_sigkill_mixed(void **state)
{
    (void)state;
    kill_during_allreduce(ZEN_TRANSPORT_MIXED, 4, 2, "ZT_DEAD=1", 1);
}

/*
 * Rank 0 aborts while every other rank waits for a message from it: they all fail at once with
 * "rank 0 aborted: <reason>" (the abort reaches them through the liveness sockets and wakes their
 * futex waits), long before the 30 s timeout.
 */
static zen_status sc_abort(zen_comm *c, void *arg)
{
    (void)arg;
    int r = zen_comm_rank(c);
    CHECK(zen_barrier(c) == ZEN_OK);
    if (r == 0) {
        zen__sleep_ns(300 * 1000000);
        zen_comm_abort(c);
        return ZEN_OK;
    }
    int64_t t0 = zen_now_ns();
    char buf[64];
    zen_status st = zen_recv(c, buf, sizeof buf, 0, 7, NULL);
    double waited = (double)(zen_now_ns() - t0) / 1e9;
    CHECK(st == ZEN_EPEER);
    CHECK(strstr(zen_comm_last_error(c), "rank 0 aborted") != NULL);
    CHECK(waited < 10);
    return ZEN_OK;
}

static void test_abort_wakes_waiters(void **state)
{
    (void)state;
    zt_job j = { ZEN_TRANSPORT_SHM, 4, 0, 30, NULL };
    run_ok(&j, sc_abort);
    zt_job k = { ZEN_TRANSPORT_MIXED, 4, 2, 30, NULL };
    run_ok(&k, sc_abort);
}

#define SP_ROWS  997
#define SP_WIDTH 4
#define SP_NNZ   120

/* Rank r's sparse input: indices with duplicates, small integer values (exact in any order). */
static void sp_input(int r, uint32_t *idx, float *val)
{
    uint64_t rng = 77 + (uint64_t)r * 1315423911u;
    for (size_t i = 0; i < SP_NNZ; i++) {
        idx[i] = i % 5 == 4 ? idx[i - 1] : (uint32_t)(zt_rand(&rng) % (r % 2 ? 60 : SP_ROWS));
        for (int k = 0; k < SP_WIDTH; k++)
            val[i * SP_WIDTH + k] = (float)((int)(zt_rand(&rng) % 9) - 4);
    }
}

/* Sparse allreduce through every scheme, flat and hierarchical (which on a mixed communicator
 * reduces over shm inside a host and sparse over tcp across), against a dense sum of every
 * rank's regenerated input. */
static zen_status sc_sparse(zen_comm *c, void *arg)
{
    (void)arg;
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    static uint32_t idx[SP_NNZ];
    static float val[SP_NNZ * SP_WIDTH], ref[SP_ROWS * SP_WIDTH], out[SP_ROWS * SP_WIDTH];
    memset(ref, 0, sizeof ref);
    for (int p = 0; p < n; p++) {
        sp_input(p, idx, val);
        for (size_t i = 0; i < SP_NNZ; i++)
            for (int k = 0; k < SP_WIDTH; k++)
                ref[idx[i] * SP_WIDTH + k] += val[i * SP_WIDTH + k];
    }
    sp_input(r, idx, val);
    zen_sparse_tensor in = { SP_ROWS, SP_WIDTH, SP_NNZ, ZEN_INDEX_U32, idx, ZEN_F32, val };
    static const zen_sparse_scheme schemes[] = { ZEN_SPARSE_BALANCED, ZEN_SPARSE_HIERARCHICAL,
                                                 ZEN_SPARSE_ALLGATHER, ZEN_SPARSE_AUTO };
    for (size_t s = 0; s < sizeof schemes / sizeof schemes[0]; s++) {
        for (int h = ZEN_SPARSE_HIER_OFF; h <= ZEN_SPARSE_HIER_ON; h++) {
            zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
            o.scheme = schemes[s];
            o.hierarchy = h;
            zen_sparse_stats stats;
            CHECK(zen_sparse_allreduce_dense(c, &in, out, &o, &stats) == ZEN_OK);
            CHECK(memcmp(out, ref, sizeof ref) == 0);
            if (h == ZEN_SPARSE_HIER_ON && zen_comm_transport(c) == ZEN_TRANSPORT_MIXED)
                CHECK(stats.hierarchical == 1 && stats.hosts == 2);
        }
    }
    return ZEN_OK;
}

static void test_sparse(void **state)
{
    (void)state;
    zt_job j = { ZEN_TRANSPORT_SHM, 3, 0, 30, NULL };
    run_ok(&j, sc_sparse);
    zt_job k = { ZEN_TRANSPORT_MIXED, 4, 2, 30, NULL };
    run_ok(&k, sc_sparse);
}

/* 'T' when process pid is stopped (/proc/PID/stat's state). */
static int is_stopped(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    const char *paren = got ? strrchr(line, ')') : NULL;
    return paren && paren[1] == ' ' && paren[2] == 'T';
}

/*
 * A single-copy send whose receiver reads it, acknowledges it and leaves before the sender
 * wakes: the send succeeded. The sender used to look for a dead peer before the ack, fail with
 * "rank 1 closed ..." and poison its communicator (a spurious warning at teardown after a CMA
 * all_gather). Rank 1 stops rank 0 (SIGSTOP) while it waits for the ack, takes the message
 * from the stopped process, and exits; a helper process continues rank 0 once rank 1 is gone,
 * so that rank 0's sender and its monitor thread (which sees rank 1's socket closed) wake
 * together.
 */
enum {
    ACK_BYTES = 1 << 20 /* above ZEN_SHM_CMA_MIN_BYTES: one RTS, read by the receiver */
};

static zen_status sc_ack_then_gone(zen_comm *c, void *arg)
{
    (void)arg;
    char *buf = malloc(ACK_BYTES);
    CHECK(buf);
    if (zen_comm_rank(c) == 0) {
        pid_t me = getpid();
        CHECK(zen_send(c, &me, sizeof me, 1, 1) == ZEN_OK);
        memset(buf, 7, ACK_BYTES);
        zen_status st = zen_send(c, buf, ACK_BYTES, 1, 2);
        if (st != ZEN_OK)
            fprintf(stderr, "rank 0: the acknowledged send failed: %s\n", zen_comm_last_error(c));
        free(buf);
        return st;
    }
    pid_t peer = 0, me = getpid();
    CHECK(zen_recv(c, &peer, sizeof peer, 0, 1, NULL) == ZEN_OK);
    zen_request *rq = NULL;
    CHECK(zen_irecv(c, buf, ACK_BYTES, 0, 2, &rq) == ZEN_OK);
    int done = 0;
    for (int round = 0; round < 50 && !done; round++) {
        zen__sleep_ns(100 * 1000000); /* rank 0 is in its ack wait by now, mostly */
        kill(peer, SIGSTOP);
        for (int k = 0; k < 1000 && !is_stopped(peer); k++)
            zen__sleep_ns(1000000);
        int64_t until = zen_now_ns() + 500 * 1000000;
        while (!done && zen_now_ns() < until)
            CHECK(zen_request_test(rq, &done) == ZEN_OK);
        if (!done)
            kill(peer, SIGCONT); /* the RTS was not there yet: again */
    }
    CHECK(done);
    zen_request_destroy(rq);
    for (size_t k = 0; k < ACK_BYTES; k += 4096)
        CHECK(buf[k] == 7);
    free(buf);
    pid_t helper = fork();
    CHECK(helper >= 0);
    if (helper == 0) { /* wait until rank 1 is gone (its sockets closed), then continue rank 0 */
        for (int k = 0; k < 10000 && getppid() == me; k++) /* reparented: rank 1 exited */
            zen__sleep_ns(1000000);
        zen__sleep_ns(20 * 1000000);
        kill(peer, SIGCONT);
        _exit(0);
    }
    return ZEN_OK; /* the job harness destroys the communicator and exits */
}

static void test_acked_send_survives_a_gone_receiver(void **state)
{
    (void)state;
    zt_job j = { ZEN_TRANSPORT_SHM, 2, 0, 30, "ZEN_SHM_CMA=1" }; /* the RTS path */
    run_ok(&j, sc_ack_then_gone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p2p_shm),
        cmocka_unit_test(test_p2p_shm_ring_only),
        cmocka_unit_test(test_ring_laps),
        cmocka_unit_test(test_prefault),
        cmocka_unit_test(test_p2p_mixed),
        cmocka_unit_test(test_topology),
        cmocka_unit_test(test_sparse),
        cmocka_unit_test(test_shm_across_hosts_refused),
        cmocka_unit_test(test_sigkill_shm),
        cmocka_unit_test(test_sigkill_mixed),
        cmocka_unit_test(test_abort_wakes_waiters),
        cmocka_unit_test(test_acked_send_survives_a_gone_receiver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
