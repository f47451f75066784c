/*
 * tune_replay: AUTO's tuner (src/sparse/model/auto_tune.c) replayed on recorded call times, so a
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
 * Usage: tune_replay balanced=US hierarchical=US ... < CALL_TIMES
 * The tuner's tunables (ZEN_SPARSE_TUNE_*, ZEN_SPARSE_EXPLORE_*) are read from the environment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "sparse/model/auto_tune.h"

#define MAX_ITERS 4096
#define NS        ZEN_SPARSE_SCHEME_COUNT

static double times[MAX_ITERS][NS]; /* us; 0: not recorded */

static int scheme_of(const char *name, zen_sparse_scheme *s)
{
    return zen_sparse_scheme_parse(name, s) == ZEN_OK && *s != ZEN_SPARSE_AUTO;
}

/* Read the call lines; returns the number of iterations every scheme with a prediction has. */
static int read_calls(const double *pred)
{
    char line[512];
    int iters = 0;
    while (fgets(line, sizeof line, stdin)) {
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
    for (int a = 1; a < argc; a++) {
        char name[64];
        double us;
        zen_sparse_scheme s;
        if (sscanf(argv[a], "%63[^=]=%lf", name, &us) != 2 || !scheme_of(name, &s) || !(us > 0)) {
            fprintf(stderr, "tune_replay: bad argument '%s' (want scheme=us)\n", argv[a]);
            return 2;
        }
        pred[s] = us * 1e-6;
    }
    int iters = read_calls(pred);
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
        double us = times[i][s] * (ran[s]++ == 0 && i > 0 ? cold_ratio(s, iters) : 1);
        zen__auto_tune_observe(&t, &p, us * 1e-6);
        printf("%d %s %.1f %s\n", i, zen_sparse_scheme_name((zen_sparse_scheme)s), us, kinds[kind]);
    }
    return 0;
}
