/*
 * Whether large shm messages take the single-copy path (process_vm_readv, "CMA"; shm.c) or the
 * two-copy ring pipeline. ZEN_SHM_CMA=1 takes it wherever the receiver may read the sender's
 * memory, 0 never, -1 (the default) only where it pays on this host.
 *
 * When it pays: a ring transfer costs each side one memcpy (the sender copies in, the receiver
 * copies out, in parallel), a CMA transfer one kernel copy on the receiver. In a collective
 * every rank sends and receives, so CMA saves work when kernel_copy_bw >= memcpy_bw / 2. On bare
 * metal the kernel copy runs near memcpy speed; in some VMs it pins and maps every page through
 * the hypervisor and runs 10x slower (1.2 GB/s against 16 GB/s for memcpy on a 2-core EPYC
 * Firecracker guest, where single copy made a 64 MiB allreduce 2.5-3x slower than the ring).
 *
 * The measurement: once per process, this process reads 256 KiB of its own memory with
 * process_vm_readv (the same kernel path as a peer's) and with memcpy, the best of three each
 * (about 1 ms in all where CMA is slow, 0.1 ms where it is fast). A busy host slows both alike.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "transport/shm_internal.h"

#define PROBE_BYTES ((size_t)256 << 10)
#define PROBE_REPS  3

static pthread_once_t cma_once = PTHREAD_ONCE_INIT;
static int cma_pays;

/* Best time in ns of PROBE_REPS copies of src into dst, by the kernel (cma) or memcpy; -1 when
 * the kernel refuses. */
static int64_t best_copy_ns(char *dst, char *src, int cma)
{
    int64_t best = -1;
    for (int k = 0; k < PROBE_REPS; k++) {
        int64_t t0 = zen_now_ns();
        if (cma) {
            struct iovec l = { .iov_base = dst, .iov_len = PROBE_BYTES };
            struct iovec r = { .iov_base = src, .iov_len = PROBE_BYTES };
            if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)PROBE_BYTES)
                return -1;
        } else {
            memcpy(dst, src, PROBE_BYTES);
            __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep the copy */
        }
        int64_t dt = zen_now_ns() - t0;
        best = best < 0 || dt < best ? dt : best;
    }
    return best;
}

static void measure(void)
{
    char *a = zen__malloc(2 * PROBE_BYTES);
    if (!a)
        return;                    /* no memory for 512 KiB: the ring, which needs none */
    memset(a, 1, 2 * PROBE_BYTES); /* fault both halves in first */
    int64_t mem = best_copy_ns(a + PROBE_BYTES, a, 0);
    int64_t cma = best_copy_ns(a + PROBE_BYTES, a, 1);
    zen__free(a);
    cma_pays = cma > 0 && cma <= 2 * (mem > 0 ? mem : 1);
    ZEN_INFO("shm", "single copy %s: process_vm_readv %.2f GB/s, memcpy %.2f GB/s (256 KiB)",
             cma_pays ? "on" : "off (slower than two memcpys)",
             cma > 0 ? (double)PROBE_BYTES / (double)cma : 0.0,
             mem > 0 ? (double)PROBE_BYTES / (double)mem : 0.0);
}

int zen__shm_cma_allowed(void)
{
    long mode = zen__param_long("SHM_CMA");
    if (mode >= 0)
        return mode != 0;
    pthread_once(&cma_once, measure);
    return cma_pays;
}
