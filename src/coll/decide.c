/*
 * The decision layer of the dense collectives (Open MPI's coll/tuned in miniature): for each
 * collective with a latency-bound ("short") and a bandwidth-bound ("long") algorithm, the one
 * table below says where the cut lies and when either algorithm cannot run. The algorithms
 * themselves know nothing of the choice. The cut is a tunable (zen info), the same on every rank,
 * so every rank picks the same algorithm.
 *
 *   collective  short                    long                          cut (bytes in all)
 *   allreduce   recursive halving/doubl. ring                          short while <= RHD_MAX_BYTES
 *   broadcast   binomial tree            scatter + ring allgather      short while < COLL_LONG_BYTES
 *   reduce      binomial tree            reduce-scatter + gather       short while < COLL_LONG_BYTES
 *   allgather   bruck (log2 n rounds)    ring                          short while <= BRUCK_MAX_BYTES
 *
 * A long algorithm that splits the message into one segment per rank needs count >= n; the tree
 * forms of broadcast and reduce are also best at n <= 2 (one message either way); bruck needs
 * n > 2 to save a round over the ring.
 */
#include "coll/coll_algos.h"

typedef struct decision {
    size_t (*cut)(void);   /* the tunable cut, in bytes */
    bool cut_inclusive;    /* short while bytes <= cut (else while bytes < cut) */
    int min_ranks_short;   /* fewer ranks: always long */
    int min_ranks_long;    /* fewer ranks: always short */
    bool long_needs_count; /* long needs count >= ranks (a segment per rank) */
} decision;

static const decision TABLE[ZEN_COLL_DECIDE_COUNT] = {
    [ZEN_COLL_DECIDE_ALLREDUCE] = { zen__coll_rhd_max_bytes, true, 1, 1, true },
    [ZEN_COLL_DECIDE_BROADCAST] = { zen__coll_long_bytes, false, 1, 3, true },
    [ZEN_COLL_DECIDE_REDUCE] = { zen__coll_long_bytes, false, 1, 3, true },
    [ZEN_COLL_DECIDE_ALLGATHER] = { zen__coll_allgather_bruck_max_bytes, true, 3, 1, false },
};

bool zen__coll_decide_long(zen_coll_decide_kind kind, int nranks, size_t bytes, size_t count)
{
    if ((unsigned)kind >= ZEN_COLL_DECIDE_COUNT)
        return false;
    const decision *d = &TABLE[kind];
    if (nranks < d->min_ranks_long || (d->long_needs_count && count < (size_t)nranks))
        return false;
    if (nranks < d->min_ranks_short)
        return true;
    size_t cut = d->cut();
    return d->cut_inclusive ? bytes > cut : bytes >= cut;
}
