/*
 * Before the first step every rank states what it starts from (status of its checkpoint load,
 * step, checksum of the full weights, parameter count) and all compare: ranks that resumed from
 * different checkpoints (or some from none) would train inconsistent replicas for the whole run
 * and only fail at the end, if at all. One allgather of 4 x i64 per rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "trainer.h"

/* "2, 5" for the ranks whose record differs from rank 0's (or that failed) into out. */
static void list_ranks(const int64_t *all, int n, int failed_only, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (int r = 0; r < n && used < cap; r++) {
        const int64_t *x = all + 4 * r;
        int bad = failed_only ? x[0] != 0 : memcmp(x + 1, all + 1, 3 * sizeof *x) != 0;
        if (!bad)
            continue;
        int k = snprintf(out + used, cap - used, "%s%d", used ? ", " : "", r);
        if (k > 0)
            used += (size_t)k;
    }
}

zen_status zen_trainer_agree_start(zen_comm *world, zen_status mine, uint64_t step,
                                   uint64_t checksum, uint64_t nparams, char *err, size_t errlen)
{
    int n = zen_comm_size(world);
    int64_t rec[4] = { mine == ZEN_OK ? 0 : 1, (int64_t)step, (int64_t)checksum, (int64_t)nparams };
    int64_t *all = zen_train_malloc_array((size_t)n * 4, sizeof *all);
    if (!all)
        return ZEN_ENOMEM;
    zen_status st = zen_allgather(world, rec, all, 4, ZEN_I64);
    if (st != ZEN_OK) {
        free(all);
        return st;
    }
    char ranks[256];
    list_ranks(all, n, 1, ranks, sizeof ranks);
    if (ranks[0]) {
        if (mine == ZEN_OK) /* a failed rank keeps its own, more precise, error */
            snprintf(err, errlen, "rank(s) %s could not load the checkpoint (see their errors)",
                     ranks);
        free(all);
        return mine != ZEN_OK ? mine : ZEN_EMISMATCH;
    }
    list_ranks(all, n, 0, ranks, sizeof ranks);
    if (ranks[0]) {
        int me = zen_comm_rank(world);
        int other = 0;
        for (int r = 1; r < n && !other; r++)
            if (memcmp(all + 4 * r + 1, all + 1, 3 * sizeof *all) != 0)
                other = r;
        snprintf(err, errlen,
                 "ranks start from different checkpoints: rank 0 at step %lld (weights checksum "
                 "%016llx, %lld parameters), rank %d at step %lld (%016llx, %lld); rank(s) %s "
                 "differ from rank 0 (rank %d is this one): give every rank the same --resume",
                 (long long)all[1], (unsigned long long)all[2], (long long)all[3], other,
                 (long long)all[4 * other + 1], (unsigned long long)all[4 * other + 2],
                 (long long)all[4 * other + 3], ranks, me);
        st = ZEN_EMISMATCH;
    }
    free(all);
    return st;
}
