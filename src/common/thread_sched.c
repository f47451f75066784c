/*
 * Communication threads ask for a short scheduling slice.
 *
 * Why: a collective is a chain of hand-offs between threads. In a ring step the tcp reader thread
 * wakes when the chunk arrives, then the thread that runs the collective wakes to reduce it and
 * write the next chunk; the wire to the next rank stays idle until both have run. When the rank's
 * training thread (or other ranks' threads on an oversubscribed host) keeps every core busy, a
 * woken thread waits in the run queue until the running one has used up its slice (Linux EEVDF:
 * about 0.75 ms x (1 + log2 CPUs), protected from wake-up preemption), at every hand-off. Measured on the
 * emulated 4-host cluster (4 ranks on 2 cores) the reader threads waited 77 ms per training step
 * that way and a 2 MB ring allreduce took up to twice its wire time while backward ran.
 *
 * What: since Linux 6.12 a SCHED_OTHER thread may request its own slice (sched_setattr with
 * sched_runtime, 0.1-100 ms, no privilege needed). A short slice gives the woken thread an earlier
 * virtual deadline, so it preempts a compute thread at once instead of after that thread's slice.
 * It does not raise the thread's weight: over time it gets no more CPU than before, it only gets
 * it sooner, in shorter pieces, which is what a thread that runs 20-100 us per wake-up needs.
 * Older kernels accept and ignore the field; other systems do nothing.
 *
 * The nice value is passed through unchanged (sched_setattr sets it too), so a rank started at
 * nice 19 stays there.
 */
#include "common/thread_sched.h"

#include "common/tunables.h"

#if defined(__linux__)
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's struct sched_attr (uapi/linux/sched/types.h), not in every libc's headers. */
typedef struct sched_attr_v1 {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime; /* SCHED_OTHER since 6.12: the requested slice, ns */
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
} sched_attr_v1;

int zen__thread_comm_slice(void)
{
    long us = zen__param_long("COMM_SLICE_US");
    if (us <= 0)
        return 0;
#if defined(SYS_sched_setattr) && defined(SYS_gettid)
    pid_t tid = (pid_t)syscall(SYS_gettid);
    if (sched_getscheduler(0) != SCHED_OTHER)
        return 0; /* a real-time or batch policy chosen by the user stays */
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)tid);
    if (nice == -1 && errno != 0)
        return 0;
    sched_attr_v1 a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.sched_policy = SCHED_OTHER;
    a.sched_nice = nice;
    a.sched_runtime = (uint64_t)us * 1000u;
    return syscall(SYS_sched_setattr, 0, &a, 0) == 0;
#else
    return 0;
#endif
}
#else
int zen__thread_comm_slice(void)
{
    return 0;
}
#endif
