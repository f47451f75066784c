/*
 * The per-rank placement block of `zen bench` (nccl-tests prints "#  Rank 0 Group 0 Pid ... on
 * host device ..."): which process, host and cpus every rank ran on, so a table read later says
 * whether ranks shared cores. Every rank fills a fixed-size record; one zen_gather brings them to
 * rank 0 (n * 192 bytes, once per run, before the timed sweep).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

typedef struct place_rec {
    int32_t rank, pid;
    char host[64];
    char cpus[120]; /* "0-3,8", truncated with "..." */
} place_rec;        /* a multiple of 4 bytes: gathered as ZEN_I32 */

/* The cpus this thread may run on, as ranges. */
static void cpu_list(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    size_t len = 0;
    out[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set))
            last++;
        char item[32];
        int k = last > c ? snprintf(item, sizeof item, "%s%d-%d", len ? "," : "", c, last)
                         : snprintf(item, sizeof item, "%s%d", len ? "," : "", c);
        if (len + (size_t)k + 4 >= cap) {
            snprintf(out + len, cap - len, ",...");
            return;
        }
        memcpy(out + len, item, (size_t)k + 1);
        len += (size_t)k;
        c = last;
    }
#endif
}

zen_status bench_print_placement(zen_comm *comm)
{
    int rank = zen_comm_rank(comm), n = zen_comm_size(comm);
    place_rec me;
    memset(&me, 0, sizeof me);
    me.rank = rank;
    me.pid = (int32_t)getpid();
    if (gethostname(me.host, sizeof me.host - 1) != 0)
        snprintf(me.host, sizeof me.host, "unknown");
    cpu_list(me.cpus, sizeof me.cpus);
    place_rec *all = rank == 0 ? calloc((size_t)n, sizeof *all) : NULL;
    if (rank == 0 && !all)
        return ZEN_ENOMEM;
    zen_status st = zen_gather(comm, &me, all, sizeof me / sizeof(int32_t), ZEN_I32, 0);
    if (st == ZEN_OK && rank == 0) {
        for (int r = 0; r < n; r++) {
            all[r].host[sizeof all[r].host - 1] = '\0'; /* wire data: never trust a terminator */
            all[r].cpus[sizeof all[r].cpus - 1] = '\0';
            printf("#  Rank %3d Pid %7d on %s cpus %s\n", (int)all[r].rank, (int)all[r].pid,
                   all[r].host, all[r].cpus);
        }
        fflush(stdout);
    }
    free(all);
    return st;
}
