/*
 * tune_replay: AUTO's tuner (src/sparse/plan/auto_tune.c) replayed on recorded call times, so a
 * change of its policy can be judged on many runs of real load in seconds rather than on one
 * noisy grid run an hour long.
 *
 * Input: the `# call SCHEME ITERATION US RAN` lines of `zen bench sparse --call-times` (schemes
 * interleaved call by call) on stdin, and the model's prediction of each scheme in microseconds
 * (its model_us; a common factor does not matter, the tuner only compares ratios) as arguments
 * `scheme=us`. In iteration i the replayed tuner chooses a scheme and is told the time that
 * scheme's own call took in iteration i: the same moment of the run, the same load. A scheme's
 * first call in the replay, in iteration i > 0, takes its time times the recorded scheme's own
 * first-call ratio (iteration 0 over its median of iterations 1-5): AUTO's first call of a scheme
 * is its cold one too. The recorded AUTO calls are not used.
 *
 * Output: one line per iteration, `ITERATION SCHEME US KIND` (KIND: exploit, warm, recheck).
 * bench/tune_replay.py runs it over a directory of recorded cells and scores the outcome as the
 * grid does (bench/sparse_grid_table.py).
 *
 * --signal=S tells the tuner a statistic over the ranks' own times of each call (the `# rank-call`
 * lines) instead of the slowest rank's, while the output (and so the score) stays the slowest
 * rank's time: max, median (what the library tells it, zen__auto_tune_call_time), mean, min,
 * q75 (the upper quartile), or scaled (the median times the scheme's median slowest-over-median
 * ratio of its last 5 calls).
 *
 * Usage: tune_replay [--signal=S] balanced=US hierarchical=US ... < CALL_TIMES
 * The tuner's tunables (ZEN_SPARSE_TUNE_*, ZEN_SPARSE_EXPLORE_*) are read from the environment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "sparse/plan/auto_tune.h"

#define MAX_ITERS 4096
#define NS        ZEN_SPARSE_SCHEME_COUNT

static double times[MAX_ITERS][NS];  /* us; 0: not recorded */
static double signal[MAX_ITERS][NS]; /* what the tuner is told (--signal); 0: times */

/* --signal: the statistic over the ranks' own times of a call (`# rank-call` lines) that the
 * tuner is told, instead of the slowest rank's time it is scored on. */
typedef enum {
    SIG_MAX,
    SIG_MEDIAN,
    SIG_MEAN,
    SIG_MIN,
    SIG_Q75,
    SIG_SCALED
} signal_kind;

static double over_ranks(signal_kind k, double *v, int n)
{
    double r = v[0];
    if (k == SIG_MEDIAN || k == SIG_SCALED)
        return zen__auto_tune_call_time(v, (size_t)n);
    if (k == SIG_Q75) {
        zen__median_inplace(v, (size_t)n); /* sorts */
        return v[(3 * (n - 1) + 3) / 4];
    }
    for (int i = 1; i < n; i++)
        r = k == SIG_MEAN ? r + v[i] : k == SIG_MIN ? (v[i] < r ? v[i] : r) : (v[i] > r ? v[i] : r);
    return k == SIG_MEAN ? r / n : r;
}

static void read_rank_call(const char *line, signal_kind k)
{
    char name[64];
    int it, used;
    zen_sparse_scheme s;
    if (sscanf(line, "# rank-call %63s %d%n", name, &it, &used) != 2 || it < 0 || it >= MAX_ITERS ||
        zen_sparse_scheme_parse(name, &s) != ZEN_OK || s == ZEN_SPARSE_AUTO)
        return;
    double v[1024];
    int n = 0, m;
    const char *p = line + used;
    while (n < 1024 && sscanf(p, "%lf%n", &v[n], &m) == 1) {
        p += m;
        n++;
    }
    if (n > 0)
        signal[it][s] = over_ranks(k, v, n);
}

/* --signal=scaled: scheme s's median slowest-over-median ratio over its last 5 calls, this one
 * (ratio) included. */
static double usual_spread(int s, double ratio)
{
    static double hist[NS][5];
    static int nh[NS];
    hist[s][nh[s]++ % 5] = ratio;
    double h[5];
    int k = nh[s] < 5 ? nh[s] : 5;
    memcpy(h, hist[s], sizeof h);
    return zen__median_inplace(h, (size_t)k);
}

static int scheme_of(const char *name, zen_sparse_scheme *s)
{
    return zen_sparse_scheme_parse(name, s) == ZEN_OK && *s != ZEN_SPARSE_AUTO;
}

/* Read the call lines; returns the number of iterations every scheme with a prediction has. */
static int read_calls(const double *pred, signal_kind k)
{
    char line[16384];
    int iters = 0;
    while (fgets(line, sizeof line, stdin)) {
        read_rank_call(line, k);
        char name[64];
        int it;
        double us;
        zen_sparse_scheme s;
        if (sscanf(line, "# call %63s %d %lf", name, &it, &us) != 3 || it < 0 || it >= MAX_ITERS)
            continue;
        if (!scheme_of(name, &s)) /* auto, twins */
            continue;
        times[it][s] = us;
        if (it + 1 > iters)
            iters = it + 1;
    }
    for (int i = 0; i < iters; i++)
        for (int s = 1; s < NS; s++)
            if (pred[s] > 0 && !(times[i][s] > 0))
                return i;
    return iters;
}

/* A scheme's first call over its median of the next five: what a cold call costs it. */
static double cold_ratio(int s, int iters)
{
    double v[5];
    int k = 0;
    for (int i = 1; i < iters && k < 5; i++)
        v[k++] = times[i][s];
    double m = k ? zen__median_inplace(v, (size_t)k) : 0;
    return m > 0 && times[0][s] > m ? times[0][s] / m : 1;
}

int main(int argc, char **argv)
{
    double pred[NS] = { 0 };
    signal_kind sig = SIG_MAX;
    int use_signal = 0;
    for (int a = 1; a < argc; a++) {
        char name[64];
        if (strncmp(argv[a], "--signal=", 9) == 0) {
            static const char *const names[] = { "max", "median", "mean", "min", "q75", "scaled" };
            use_signal = 0;
            for (int i = 0; i < 6; i++)
                if (strcmp(argv[a] + 9, names[i]) == 0) {
                    sig = (signal_kind)i;
                    use_signal = 1;
                }
            if (!use_signal) {
                fprintf(stderr, "tune_replay: --signal wants max, median, mean, min, q75 or "
                                "scaled\n");
                return 2;
            }
            continue;
        }
        double us;
        zen_sparse_scheme s;
        if (sscanf(argv[a], "%63[^=]=%lf", name, &us) != 2 || !scheme_of(name, &s) || !(us > 0)) {
            fprintf(stderr, "tune_replay: bad argument '%s' (want scheme=us)\n", argv[a]);
            return 2;
        }
        pred[s] = us * 1e-6;
    }
    int iters = read_calls(pred, sig);
    if (iters < 2) {
        fprintf(stderr,
                "tune_replay: fewer than 2 iterations with every predicted scheme on stdin\n");
        return 1;
    }
    for (int s = 1; s < NS; s++) /* a scheme not predicted is never chosen */
        if (!(pred[s] > 0))
            pred[s] = 1e300;
    zen_auto_tune t;
    zen_auto_tune_params p;
    zen__auto_tune_init(&t);
    zen__auto_tune_params_default(&p);
    int ran[NS] = { 0 };
    static const char *const kinds[] = { "exploit", "warm", "recheck" };
    for (int i = 0; i < iters; i++) {
        zen_auto_tune_kind kind;
        int s = (int)zen__auto_tune_choose(&t, &p, pred, &kind, NULL);
        /* the recorded iteration 0 is cold already */
        double cold = ran[s]++ == 0 && i > 0 ? cold_ratio(s, iters) : 1;
        double us = times[i][s] * cold;
        double told = use_signal && signal[i][s] > 0 ? signal[i][s] * cold : us;
        if (use_signal && sig == SIG_SCALED && signal[i][s] > 0)
            told *= usual_spread(s, times[i][s] / signal[i][s]);
        zen__auto_tune_observe(&t, &p, told * 1e-6);
        printf("%d %s %.1f %s\n", i, zen_sparse_scheme_name((zen_sparse_scheme)s), us, kinds[kind]);
    }
    return 0;
}
