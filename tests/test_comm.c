/* Communicator basics: create, p2p, requests, split, stats, arrivals, failure propagation. */
#include <string.h>

#include "coll/comm_internal.h"
#include "testutil.h"

static zen_status ring_p2p(zen_comm *c, void *arg)
{
    (void)arg;
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    int next = (r + 1) % n, prev = (r - 1 + n) % n;
    int out[3] = { r, r * 10, 7 }, in[3] = { 0 };
    zen_request *rq = NULL;
    ZT_CHECK(c, zen_irecv(c, in, sizeof in, prev, 5, &rq) == ZEN_OK);
    ZT_CHECK(c, zen_send(c, out, sizeof out, next, 5) == ZEN_OK);
    size_t got = 0;
    ZT_CHECK(c, zen_request_wait(rq, -1, &got) == ZEN_OK);
    zen_request_destroy(rq);
    ZT_CHECK(c, got == sizeof in && in[0] == prev && in[1] == prev * 10);
    return ZEN_OK;
}

static void test_p2p_ring(void **state)
{
    (void)state;
    for (int n = 1; n <= 5; n++)
        zt_run_inproc(n, ring_p2p, NULL);
}

static zen_status fifo_and_truncation(zen_comm *c, void *arg)
{
    (void)arg;
    if (zen_comm_rank(c) == 0) {
        for (int i = 0; i < 50; i++)
            ZT_CHECK(c, zen_send(c, &i, sizeof i, 1, 3) == ZEN_OK);
        double big[4] = { 1, 2, 3, 4 };
        ZT_CHECK(c, zen_send(c, big, sizeof big, 1, 4) == ZEN_OK);
    } else {
        for (int i = 0; i < 50; i++) {
            int v = -1;
            ZT_CHECK(c, zen_recv(c, &v, sizeof v, 0, 3, NULL) == ZEN_OK);
            ZT_CHECK(c, v == i);
        }
        double small[2];
        ZT_CHECK(c, zen_recv(c, small, sizeof small, 0, 4, NULL) == ZEN_EPROTO);
        ZT_CHECK(c, strstr(zen_comm_last_error(c), "rank 0") != NULL);
    }
    return ZEN_OK;
}

static void test_fifo_and_truncation(void **state)
{
    (void)state;
    zt_run_inproc(2, fifo_and_truncation, NULL);
}

static zen_status wait_timeout(zen_comm *c, void *arg)
{
    (void)arg;
    if (zen_comm_rank(c) == 1) {
        int v = 0;
        zen_request *rq = NULL;
        ZT_CHECK(c, zen_irecv(c, &v, sizeof v, 0, 9, &rq) == ZEN_OK);
        int done = 1;
        ZT_CHECK(c, zen_request_test(rq, &done) == ZEN_OK && done == 0);
        ZT_CHECK(c, zen_request_wait(rq, 0.05, NULL) == ZEN_ETIMEDOUT);
        ZT_CHECK(c, strstr(zen_comm_last_error(c), "rank 0") != NULL);
        /* the request is still valid: the message now arrives */
        ZT_CHECK(c, zen_send(c, &v, sizeof v, 0, 1) == ZEN_OK);
        ZT_CHECK(c, zen_request_wait(rq, -1, NULL) == ZEN_OK && v == 42);
        zen_request_destroy(rq);
    } else {
        int go = 0, v = 42;
        ZT_CHECK(c, zen_recv(c, &go, sizeof go, 1, 1, NULL) == ZEN_OK);
        ZT_CHECK(c, zen_send(c, &v, sizeof v, 1, 9) == ZEN_OK);
    }
    return ZEN_OK;
}

static void test_wait_timeout(void **state)
{
    (void)state;
    zt_run_inproc(2, wait_timeout, NULL);
}

static zen_status split_grid(zen_comm *c, void *arg)
{
    (void)arg;
    int r = zen_comm_rank(c);
    zen_comm *row = NULL, *col = NULL, *none = (zen_comm *)1;
    /* 6 ranks as a 2 x 3 grid; reversed keys reverse the order */
    ZT_CHECK(c, zen_comm_split(c, r / 3, -r, &row) == ZEN_OK);
    ZT_CHECK(c, zen_comm_split(c, r % 3, r, &col) == ZEN_OK);
    ZT_CHECK(c, zen_comm_split(c, r == 0 ? 0 : ZEN_SPLIT_NONE, 0, &none) == ZEN_OK);
    ZT_CHECK(c, zen_comm_size(row) == 3 && zen_comm_rank(row) == 2 - r % 3);
    ZT_CHECK(c, zen_comm_size(col) == 2 && zen_comm_rank(col) == r / 3);
    ZT_CHECK(c, (r == 0) == (none != NULL));
    /* messages on the child do not mix with the parent's */
    int peer = zen_comm_rank(col) ^ 1, v = r, got = -1;
    ZT_CHECK(c, zen_send(col, &v, sizeof v, peer, 1) == ZEN_OK);
    ZT_CHECK(c, zen_recv(col, &got, sizeof got, peer, 1, NULL) == ZEN_OK);
    ZT_CHECK(c, got == (r + 3) % 6);
    int64_t arrivals[3];
    ZT_CHECK(c, zen_comm_gather_arrivals(row, arrivals, NULL, NULL) == ZEN_EINVAL);
    ZT_CHECK(c, zen_barrier(row) == ZEN_OK);
    ZT_CHECK(c, zen_comm_gather_arrivals(row, arrivals, NULL, NULL) == ZEN_OK);
    ZT_CHECK(c, arrivals[0] > 0 && arrivals[1] > 0 && arrivals[2] > 0);
    zen_comm_destroy(none);
    zen_comm_destroy(row);
    zen_comm_destroy(col);
    return ZEN_OK;
}

static void test_split(void **state)
{
    (void)state;
    zt_run_inproc(6, split_grid, NULL);
}

static zen_status one_rank_fails(zen_comm *c, void *arg)
{
    int *saw = arg;
    if (zen_comm_rank(c) == 2)
        return ZEN_EINVAL; /* this rank gives up; the others are blocked on it */
    int v = 0;
    zen_status st = zen_recv(c, &v, sizeof v, 2, 1, NULL);
    if (st == ZEN_EPEER && strstr(zen_comm_last_error(c), "rank 2"))
        saw[zen_comm_rank(c)] = 1;
    return ZEN_OK;
}

static void test_failure_names_peer(void **state)
{
    (void)state;
    int saw[4] = { 0 };
    zen_status status[4];
    zen_status st = zen_run_inproc(4, NULL, one_rank_fails, saw, status);
    assert_int_equal(st, ZEN_EINVAL);
    assert_int_equal(status[2], ZEN_EINVAL);
    assert_true(saw[0] && saw[1] && saw[3]);
}

static void add_f32(void *buf, const void *other, const void *message, size_t bytes, void *ctx)
{
    (void)ctx;
    float *out = buf;
    const float *a = other, *b = message;
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        out[i] = a[i] + b[i];
}

/* A combining receive stores other + message, whether the message arrives after the receive is
 * posted (the sender combines on delivery) or before it (combined from the unexpected buffer). */
static zen_status combine_receive(zen_comm *c, void *arg)
{
    (void)arg;
    zen_coll cc;
    ZT_CHECK(c, zen__coll_begin(c, "combine-test", &cc) == ZEN_OK);
    float msg[3] = { 1, 2, 3 }, other[3] = { 10, 20, 30 }, out[3] = { 0 };
    int token = 0;
    for (int late_post = 0; late_post < 2; late_post++) {
        if (zen_comm_rank(c) == 0) {
            if (!late_post) /* wait until rank 1 has posted */
                ZT_CHECK(c, zen_recv(c, &token, sizeof token, 1, 1, NULL) == ZEN_OK);
            ZT_CHECK(c, zen__coll_sendrecv(c, &cc, 1, msg, sizeof msg, -1, NULL, 0) == ZEN_OK);
            if (late_post)
                ZT_CHECK(c, zen_send(c, &token, sizeof token, 1, 2) == ZEN_OK);
            continue;
        }
        if (late_post) /* the message is already buffered when the receive is posted */
            ZT_CHECK(c, zen_recv(c, &token, sizeof token, 0, 2, NULL) == ZEN_OK);
        zen_treq *req = NULL;
        zen_combine cb = { add_f32, other, NULL };
        zen_status st = zen__coll_irecv_combine(c, &cc, 0, out, sizeof out, &cb, &req);
        if (st == ZEN_EUNSUPPORTED)
            return zen__coll_end(c, &cc, ZEN_OK); /* a transport without combining receives */
        ZT_CHECK(c, st == ZEN_OK);
        if (!late_post)
            ZT_CHECK(c, zen_send(c, &token, sizeof token, 0, 1) == ZEN_OK);
        ZT_CHECK(c, zen__coll_wait(c, &cc, req, 0, sizeof out, NULL) == ZEN_OK);
        ZT_CHECK(c, out[0] == 11 && out[1] == 22 && out[2] == 33);
        out[0] = out[1] = out[2] = 0;
    }
    return zen__coll_end(c, &cc, ZEN_OK);
}

static void test_combine_receive(void **state)
{
    (void)state;
    zt_run_inproc(2, combine_receive, NULL);
}

/* A rank function that fails on its own (no communicator call failed): zen_run_inproc's warning
 * said "rank 0 returned ZEN_EIO: " with an empty detail before the caller's real message. */
static char own_failure_line[512];
static int own_failure_lines;

static void keep_init_warning(zen_log_level level, const char *subsys, const char *line, void *user)
{
    (void)user;
    if (level == ZEN_LOG_WARN && strcmp(subsys, "init") == 0 && strstr(line, "rank 0")) {
        snprintf(own_failure_line, sizeof own_failure_line, "%s", line);
        own_failure_lines++;
    }
}

static zen_status fail_own(zen_comm *c, void *arg)
{
    (void)arg;
    return zen_comm_rank(c) == 0 ? ZEN_EIO : ZEN_OK;
}

static void test_own_failure_says_what(void **state)
{
    (void)state;
    zen_log_set_sink(keep_init_warning, NULL);
    zen_status st[2] = { ZEN_OK, ZEN_OK };
    assert_int_equal(zen_run_inproc(2, NULL, fail_own, NULL, st), ZEN_EIO);
    zen_log_set_sink(NULL, NULL);
    assert_int_equal(st[0], ZEN_EIO);
    assert_int_equal(own_failure_lines, 1);
    assert_non_null(strstr(own_failure_line, "ZEN_EIO"));
    assert_non_null(strstr(own_failure_line, "no communicator error"));
    size_t n = strlen(own_failure_line);
    while (n > 0 && (own_failure_line[n - 1] == '\n' || own_failure_line[n - 1] == ' '))
        n--;
    assert_true(n > 0 && own_failure_line[n - 1] != ':'); /* never an empty detail */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p2p_ring),
        cmocka_unit_test(test_fifo_and_truncation),
        cmocka_unit_test(test_wait_timeout),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_failure_names_peer),
        cmocka_unit_test(test_combine_receive),
        cmocka_unit_test(test_own_failure_says_what),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
