/* Shared helpers of the cmocka tests. */
#ifndef ZEN_TESTUTIL_H
#define ZEN_TESTUTIL_H

/* cmocka.h needs these first; keep the order. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <zen/comm.h>

/* Run fn on nranks inproc ranks and fail the test unless every rank returns ZEN_OK. */
void zt_run_inproc(int nranks, zen_rank_fn fn, void *arg);

/*
 * Run fn on nranks tcp ranks, each a forked child of this process (no exec, so fn and arg stay
 * valid), rendezvous on a free loopback port, and fail the test unless every child exits 0 (a
 * child still running after timeout_s is killed). before(rank, ctx), when not NULL, runs in the
 * child before its communicator is created (e.g. to set launcher environment variables).
 */
void zt_run_tcp_forked(int nranks, void (*before)(int rank, void *ctx), void *ctx, zen_rank_fn fn,
                       void *arg, int timeout_s);

/* zt_run_tcp_forked with another process transport: ZEN_TRANSPORT_SHM, or ZEN_TRANSPORT_MIXED
 * (shm among ranks with the same ZEN_HOST_ID, which before() may set per rank; tcp between). */
void zt_run_forked(zen_transport_kind kind, int nranks, void (*before)(int rank, void *ctx),
                   void *ctx, zen_rank_fn fn, void *arg, int timeout_s);

/* Deterministic pseudo-random numbers (splitmix64) for test data. */
uint64_t zt_rand(uint64_t *state);

/* n test gradients from seed: uniform in (-1, 1) with about one exact zero in 17, or (ties) +-1
 * only, so that every magnitude is equal. */
void zt_fill_grad(float *g, size_t n, int ties, uint64_t seed);

/* Fail the calling rank with a message when cond is false (for use inside rank functions, where
 * cmocka's asserts must not longjmp out of a thread). */
#define ZT_CHECK(comm, cond)                            \
    do {                                                \
        if (!(cond)) {                                  \
            zt_report(comm, __FILE__, __LINE__, #cond); \
            return ZEN_EINTERNAL;                       \
        }                                               \
    } while (0)

void zt_report(zen_comm *comm, const char *file, int line, const char *what);

/* A forked rank's one-line result, passed to the parent through a file named by tag, the
 * parent's pid and the rank. zt_put_result writes line (from the child; parent = getppid());
 * zt_take_result reads the first line into out (out_size bytes; "(no result)\n" or "(empty)\n"
 * when there is none) and removes the file (from the parent). */
void zt_put_result(const char *tag, int rank, const char *line);
void zt_take_result(const char *tag, int rank, char *out, size_t out_size);

/* Element i of a buffer of dtype dt (f32, f64, i32, i64, bf16) as a double, and back (bf16 through
 * f32). */
double zt_dtype_get(const void *buf, zen_dtype dt, size_t i);
void zt_dtype_put(void *buf, zen_dtype dt, size_t i, double v);

#endif
