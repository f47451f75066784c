/*
 * --dump-grads DIR: record each data-parallel rank's sparse gradients of every step, before the
 * dp average, in the trace format of docs/trace-format.md (zen/sparse.h), so that
 * `zen bench sparse --trace DIR` can replay the real embedding (and top-k) gradients through
 * every sparse-allreduce scheme and scripts/sparsity_report.py can measure them.
 *
 * Only tp rank 0 of each replica writes (the embedding gradient is replicated over tp); the
 * trace's rank and world size are the dp rank and dp size, the communicator the sync runs on.
 */
#include <stdio.h>
#include <string.h>

#include <zen/sparse.h>

#include "trainer.h"

zen_status zen_trainer_dump_grads(const char *dir, int dp_rank, int dp_size, long step,
                                  const zen_trainer_sync *s)
{
    zen_sync_local loc;
    zen_trainer_sync_local(s, &loc);
    zen_trace_tensor t[2];
    size_t n = 0;
    memset(t, 0, sizeof t);
    if (loc.emb_rows > 0) {
        snprintf(t[n].name, sizeof t[n].name, "wte");
        t[n].rows = loc.emb_rows;
        t[n].width = loc.emb_width;
        t[n].nnz = loc.emb_nnz;
        t[n].indices = (uint32_t *)loc.emb_idx; /* the writer only reads */
        t[n].values = (float *)loc.emb_val;
        n++;
    }
    if (loc.topk_rows > 0 && loc.topk_idx) {
        snprintf(t[n].name, sizeof t[n].name, "topk");
        t[n].rows = loc.topk_rows;
        t[n].width = 1;
        t[n].nnz = loc.topk_nnz;
        t[n].indices = (uint32_t *)loc.topk_idx;
        t[n].values = (float *)loc.topk_val;
        n++;
    }
    zen_trace_step ts = { (uint32_t)dp_rank, (uint32_t)dp_size, (uint64_t)step, n, t };
    char path[1024];
    zen_status st = zen_trace_path(path, sizeof path, dir, (uint32_t)dp_rank, (uint64_t)step);
    if (st == ZEN_OK)
        st = zen_trace_write(path, &ts);
    return st;
}
