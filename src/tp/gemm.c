/*
 * The one GEMM entry point of the tp runtime: cblas_sgemm, timed, and slowed down when this rank
 * emulates a straggler.
 *
 * Emulation: the rank's GEMM work must take `factor` times as long as it really does, and the
 * slowdown must scale with the work actually given to the rank (so that resizing or migrating
 * away columns shrinks it). Hence it is derived per GEMM call from that call's measured time:
 *   SLEEP: (factor - 1) x t_gemm is added to a sleep debt, paid before the next tp collective or
 *          migration wait and at the step boundary (zen__tp_pay_sleep_debt). One sleep per layer
 *          instead of one per GEMM, and the oversleep of nanosleep (tens of microseconds, as
 *          long as a small GEMM) is credited against the next debt, so the emulated total stays
 *          close to factor x t_gemm. The timers account factor x t_gemm.
 *   SPIN:  hold the core until factor x t_gemm of wall time has passed since the GEMM started:
 *          repeat the GEMM into a scratch output (results discarded; at most floor(factor - 1)
 *          times, and only while a repeat of t_gemm still fits), then busy-wait to the deadline.
 *          The deadline, not the repeat count, sets the slowdown, so SPIN and SLEEP slow a rank
 *          by the same wall time and differ only in whether the core stays busy. (Counting
 *          repeats instead made a spinning rank less slow than its factor whenever ranks share
 *          cores: the first GEMM ran at a shared core's speed, t_gemm, but the repeats could run
 *          while the peers were already waiting, at a whole core's -- docs/pytorch-tp.md, "What
 *          the emulation means".) The timers account the measured wall time.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "tp/tp_internal.h"

zen_status zen__tp_scratch(float **buf, size_t *cap, size_t count)
{
    if (count <= *cap)
        return ZEN_OK;
    float *p = zen__malloc_array(count, sizeof(float));
    if (!p)
        return ZEN_ENOMEM;
    zen__free(*buf);
    *buf = p;
    *cap = count;
    return ZEN_OK;
}

zen_status zen__tp_allreduce(zen_tp_group *g, float *buf, size_t count)
{
    zen__tp_pay_sleep_debt(g);
    int64_t t0 = zen_now_ns();
    zen_status st = zen_allreduce(g->comm, buf, buf, count, ZEN_F32, ZEN_SUM);
    tp_add_wait(g, t0);
    return st;
}

static void busy_wait_ns(int64_t ns)
{
    int64_t end = zen_now_ns() + ns;
    while (zen_now_ns() < end) {
    }
}

void zen__tp_pay_sleep_debt(zen_tp_group *g)
{
    /* at most 2 ms of oversleep is carried as credit, so one long preemption is not repaid
     * by skipping the slowdown for many steps */
    if (g->sleep_debt_ns <= 0)
        return;
    int64_t t0 = zen_now_ns();
    zen__sleep_ns(g->sleep_debt_ns);
    g->sleep_debt_ns -= zen_now_ns() - t0;
    if (g->sleep_debt_ns < -2000000)
        g->sleep_debt_ns = -2000000;
}

/* Spin mode: GEMM repeats while one more fits before factor x real_ns after t0, then a busy
 * wait to that deadline. */
static void spin(zen_tp_group *g, int m, int n, int k, int trans_a, int trans_b, const float *a,
                 int lda, const float *b, int ldb, int64_t t0, int64_t real_ns)
{
    int64_t end = t0 + (int64_t)(g->slow_factor * (double)real_ns);
    int repeats = (int)(g->slow_factor - 1.0);
    size_t need = (size_t)m * (size_t)n;
    if (repeats > 0 && zen__tp_scratch(&g->spin_scratch, &g->spin_cap, need) == ZEN_OK) {
        for (int i = 0; i < repeats && zen_now_ns() + real_ns <= end; i++)
            cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                        trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f,
                        g->spin_scratch, n);
    }
    busy_wait_ns(end - zen_now_ns());
}

void zen__tp_gemm(zen_tp_group *g, int timed, int own, double full_scale, int trans_a, int trans_b,
                  int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
                  float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        /* an empty inner dimension (everything pruned) still defines C = beta C */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
        return;
    }
    int64_t t0 = zen_now_ns();
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    int64_t real = zen_now_ns() - t0;
    int64_t total = real;
    if (g->slow_factor > 1.0 && g->emu.mode == ZEN_TP_SLOW_SPIN) {
        spin(g, m, n, k, trans_a, trans_b, a, lda, b, ldb, t0, real);
        total = zen_now_ns() - t0;
    } else if (g->slow_factor > 1.0) {
        total = (int64_t)(g->slow_factor * (double)real);
        g->sleep_debt_ns += total - real;
    }
    g->step_compute_ns += total;
    if (timed && own) {
        g->step_norm_ns += (double)total * full_scale;
        g->step_timed = 1;
        if (g->nsamples < TP_MAX_SAMPLES) {
            struct tp_sample *sm = &g->samples[g->nsamples++];
            sm->ns = (double)total;
            sm->flops = 2.0 * m * n * k;
            sm->scale = full_scale;
        }
    }
}

static int cmp_rate(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * Why not just the sum: a GEMM that is preempted by the scheduler (common when rank threads
 * share cores) can take 10-100x its normal time, and the scaling by K / columns computed
 * multiplies that for a rank that computes few columns, so one spike would mark a rank as a
 * straggler and make it shed even more columns. Each GEMM's time is therefore capped at
 * 3 x (the step's median time per flop) x its flops before the scaled sum; moderate, steady
 * slowness (shared device, emulated factor) passes unchanged.
 */
double zen__tp_step_norm_ns(zen_tp_group *g)
{
    int n = g->nsamples;
    if (n == 0 || n == TP_MAX_SAMPLES)
        return g->step_norm_ns; /* nothing kept, or too many calls to keep: the plain sum */
    double rate[TP_MAX_SAMPLES];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (g->samples[i].flops > 0)
            rate[m++] = g->samples[i].ns / g->samples[i].flops;
    if (m == 0)
        return g->step_norm_ns;
    qsort(rate, (size_t)m, sizeof(double), cmp_rate);
    double cap = 3.0 * (m % 2 ? rate[m / 2] : 0.5 * (rate[m / 2 - 1] + rate[m / 2]));
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const struct tp_sample *sm = &g->samples[i];
        double ns = sm->ns < cap * sm->flops ? sm->ns : cap * sm->flops;
        sum += ns * sm->scale;
    }
    return sum;
}
