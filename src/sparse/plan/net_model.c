/*
 * The network a transport gives the cost model (see net_model.h).
 */
#include "sparse/plan/net_model.h"

#include <stdatomic.h>
#include <unistd.h>

#include "coll/comm_internal.h"
#include "common/tunables.h"

void zen__net_model_for(zen_transport_kind kind, zen_net_model *net)
{
    zen__net_model_for_ranks(kind, 0, net);
}

/*
 * More ranks than cores on one host (inproc threads, shm processes), over = ranks / cores: each
 * rank gets 1/over of a core for its compute and, inproc, of the copy bandwidth; the messages of
 * a step are issued one after another (overhead = the base latency); and every message costs
 * its receiver ZEN_NET_MSG_CPU_US of CPU (a futex wake-up, the mailbox locks), charged like
 * compute: with the cores saturated, a wait is time some other rank computes, so what adds up
 * is the CPU of all ranks' messages over the cores, not a latency per dependent step. Tiny
 * tensors on the 2-core VM cost 4-7 us per message that way for every scheme, ALLGATHER's and
 * PS's all-to-all (2(n-1), 4(n-1) messages) as much as HIERARCHICAL's pairwise rounds and
 * DENSE's ring (docs/algorithms.md, "Cost model").
 */
static void oversubscribe(zen_net_model *net, double over, int copies_are_bandwidth, int gbps_set)
{
    if (!gbps_set && copies_are_bandwidth)
        net->bytes_per_s /= over;
    net->overhead_s = net->latency_s;
    net->msg_cpu_s = zen__param_double("NET_MSG_CPU_US") * 1e-6;
    if (!(zen__param_double("SPARSE_CPU_SHARE") > 0))
        net->cpu.share = 1 / over;
}

/* Cores online, read once: sysconf opens a file under /sys on every call, and AUTO builds its
 * model on every record exchange (`perf`, 4 inproc ranks on a trace: a fifth of AUTO's CPU). */
static long online_cores(void)
{
    static _Atomic long cores;
    long c = atomic_load_explicit(&cores, memory_order_relaxed);
    if (c == 0) {
        c = sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&cores, c > 0 ? c : -1, memory_order_relaxed);
    }
    return c;
}

void zen__net_model_for_ranks(zen_transport_kind kind, int nranks, zen_net_model *net)
{
    /* Defaults: the transport's own figures (transport/registry.h); a kind without a row (AUTO)
     * is taken for a 10 GbE-class link. */
    const zen_transport_traits *tr = zen__transport_traits(kind);
    double gbps = tr->gbps > 0 ? tr->gbps : 10, lat_us = tr->latency_us > 0 ? tr->latency_us : 50;
    double env_gbps = zen__param_double("NET_GBPS"), env_lat = zen__param_double("NET_LAT_US");
    if (env_gbps > 0)
        gbps = env_gbps;
    if (env_lat > 0)
        lat_us = env_lat;
    net->bytes_per_s = gbps * 1e9 / 8;
    net->latency_s = lat_us * 1e-6;
    net->overhead_s = 0;
    net->msg_cpu_s = 0;
    zen_sparse_cpu_model_default(&net->cpu);
    if (tr->wire_copies >= 0) /* memory copies: 0 when the bandwidth above is the memcpy */
        net->cpu.wire_byte = tr->wire_copies * net->cpu.copy_byte;
    long cores = online_cores();
    int one_host = tr->reach == ZEN_REACH_THREADS || tr->reach == ZEN_REACH_HOST;
    if (one_host && cores > 0 && nranks > cores)
        oversubscribe(net, (double)nranks / cores, tr->wire_copies == 0, env_gbps > 0);
}
