#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tools/free_port.h"

void zt_report(zen_comm *comm, const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: rank %d: check failed: %s (last error: %s)\n", file, line,
            zen_comm_rank(comm), what, zen_comm_last_error(comm));
}

void zt_run_inproc(int nranks, zen_rank_fn fn, void *arg)
{
    zen_status status[4096];
    zen_status st = zen_run_inproc(nranks, NULL, fn, arg, status);
    if (st != ZEN_OK) {
        for (int r = 0; r < nranks && r < 4096; r++)
            if (status[r] != ZEN_OK)
                fprintf(stderr, "rank %d of %d: %s\n", r, nranks, zen_status_name(status[r]));
    }
    assert_int_equal(st, ZEN_OK);
}

uint64_t zt_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void zt_fill_grad(float *g, size_t n, int ties, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = zt_rand(&s);
        if (ties)
            g[i] = (r & 1) ? 1.0f : -1.0f;
        else /* uniform in (-1, 1) with some exact zeros */
            g[i] = (r % 17 == 0) ? 0.0f : (float)((double)(r >> 11) / 4503599627370496.0 - 1.0);
    }
}

void zt_run_tcp_forked(int nranks, void (*before)(int rank, void *ctx), void *ctx, zen_rank_fn fn,
                       void *arg, int timeout_s)
{
    zt_run_forked(ZEN_TRANSPORT_TCP, nranks, before, ctx, fn, arg, timeout_s);
}

void zt_run_forked(zen_transport_kind kind, int nranks, void (*before)(int rank, void *ctx),
                   void *ctx, zen_rank_fn fn, void *arg, int timeout_s)
{
    int port = zen_free_port();
    if (port < 0)
        fail_msg("no free port found");
    pid_t pids[64];
    assert_true(nranks >= 1 && nranks <= 64);
    fflush(NULL);
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] != 0)
            continue;
        if (before)
            before(r, ctx);
        zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
        o.transport = kind;
        o.rank = r;
        o.world_size = nranks;
        o.master_addr = "127.0.0.1";
        o.master_port = port;
        o.timeout_s = 30;
        zen_comm *c = NULL;
        zen_status st = zen_comm_create(&o, &c);
        if (st == ZEN_OK) {
            st = fn(c, arg);
            if (st != ZEN_OK) {
                fprintf(stderr, "rank %d of %d: %s: %s\n", r, nranks, zen_status_name(st),
                        zen_comm_last_error(c));
                zen_comm_abort(c);
            }
            zen_comm_destroy(c);
        }
        fflush(NULL);
        _exit(st == ZEN_OK ? 0 : 1);
    }
    time_t give_up = time(NULL) + timeout_s;
    int ok = 1;
    for (int r = 0; r < nranks; r++) {
        int status = 0;
        while (waitpid(pids[r], &status, WNOHANG) != pids[r]) {
            if (time(NULL) > give_up)
                kill(pids[r], SIGKILL);
            struct timespec ms2 = { 0, 2 * 1000 * 1000 };
            nanosleep(&ms2, NULL);
        }
        ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    assert_true(ok);
}

static void result_path(char *p, size_t n, const char *tag, int parent, int rank)
{
    snprintf(p, n, "/tmp/zen-%s-%d-%d", tag, parent, rank);
}

void zt_put_result(const char *tag, int rank, const char *line)
{
    char path[96];
    result_path(path, sizeof path, tag, (int)getppid(), rank);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%s\n", line);
        fclose(f);
    }
}

void zt_take_result(const char *tag, int rank, char *out, size_t out_size)
{
    char path[96];
    result_path(path, sizeof path, tag, (int)getpid(), rank);
    snprintf(out, out_size, "(no result)\n");
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(out, (int)out_size, f))
            snprintf(out, out_size, "(empty)\n");
        fclose(f);
    }
    unlink(path);
}

double zt_dtype_get(const void *buf, zen_dtype dt, size_t i)
{
    switch (dt) {
    case ZEN_F32:
        return ((const float *)buf)[i];
    case ZEN_F64:
        return ((const double *)buf)[i];
    case ZEN_I32:
        return ((const int32_t *)buf)[i];
    case ZEN_I64:
        return (double)((const int64_t *)buf)[i];
    default:
        return zen_bf16_to_f32(((const uint16_t *)buf)[i]);
    }
}

void zt_dtype_put(void *buf, zen_dtype dt, size_t i, double v)
{
    switch (dt) {
    case ZEN_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case ZEN_F64:
        ((double *)buf)[i] = v;
        break;
    case ZEN_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case ZEN_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    default:
        ((uint16_t *)buf)[i] = zen_f32_to_bf16((float)v);
        break;
    }
}
