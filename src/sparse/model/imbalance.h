/*
 * Imbalance ratio of paper Def. 8 for one vector of loads: n * max_j load_j / sum_j load_j.
 * 1 is perfect balance, n is everything on one rank; 0 when there is no load at all (not
 * applicable). Push imbalance is computed per worker from its own per-owner counts (the bench
 * takes the maximum over ranks, which is Def. 8's max over i and j); pull imbalance from the
 * owners' result sizes, which every rank learns in the pull.
 */
#ifndef ZEN_SPARSE_IMBALANCE_H
#define ZEN_SPARSE_IMBALANCE_H

#include <stddef.h>

static inline double zen_imbalance(const size_t *load, int n)
{
    size_t sum = 0, max = 0;
    for (int j = 0; j < n; j++) {
        sum += load[j];
        if (load[j] > max)
            max = load[j];
    }
    return sum ? (double)n * (double)max / (double)sum : 0.0;
}

#endif
