/*
 * simulate.c - the sparse cost model without communication (zen/simulate.h): predict each sparse
 * scheme's time for an embedding gradient (1M rows x 64 floats, 1% of the rows non-zero on every
 * rank) at 8 to 1024 ranks on a 10 Gbit/s network, and print the fastest. Nothing is sent: this
 * is what `zen simulate` does, for planning a job before running it. Built against an installed
 * zen in the `install_example` test:
 *
 *   cc simulate.c $(pkg-config --cflags --libs zen) -o simulate && ./simulate
 *
 * Exit status 0 when every prediction is positive and the AUTO entry is the cheapest scheme's
 * time, 1 otherwise.
 */
#include <stdio.h>

#include <zen/simulate.h>

#define ROWS    (1u << 20)
#define WIDTH   64
#define DENSITY 0.01
#define GBPS    10.0 /* per link */
#define LAT_US  20.0 /* per message */

int main(void)
{
    for (int ranks = 8; ranks <= 1024; ranks *= 4) {
        /* rows non-zero independently on each rank ("random"); a trace would give the measured
         * overlap instead (zen_index_sets_from_trace, zen_sparse_profile_from_sets) */
        zen_sparsity_profile profile;
        double t[ZEN_SPARSE_SCHEME_COUNT]; /* our array, so its length is passed along */
        if (zen_sparse_profile_synthetic(ranks, DENSITY, "random", &profile) != ZEN_OK ||
            zen_sparse_predict(ranks, ROWS, WIDTH, &profile, GBPS, LAT_US, t,
                               ZEN_SPARSE_SCHEME_COUNT) != ZEN_OK) {
            fprintf(stderr, "simulate: the model refused %d ranks\n", ranks);
            return 1;
        }
        int best = 1;
        for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
            if (!(t[s] > 0)) {
                fprintf(stderr, "simulate: %s predicted %g s\n",
                        zen_sparse_scheme_name((zen_sparse_scheme)s), t[s]);
                return 1;
            }
            best = t[s] < t[best] ? s : best;
        }
        if (t[ZEN_SPARSE_AUTO] != t[best]) {
            fprintf(stderr, "simulate: AUTO predicted %g s, the cheapest scheme %g s\n",
                    t[ZEN_SPARSE_AUTO], t[best]);
            return 1;
        }
        printf("%5d ranks: %-12s %8.2f ms (dense ring %8.2f ms)\n", ranks,
               zen_sparse_scheme_name((zen_sparse_scheme)best), t[best] * 1e3,
               t[ZEN_SPARSE_DENSE] * 1e3);
    }
    return 0;
}
