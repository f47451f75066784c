/*
 * Host grouping of a communicator, computed once and cached in its ZEN_ATTR_HOSTS slot.
 *
 * Sources, first that applies:
 *  1. the transport's host table (shm, mixed: host identities exchanged at rendezvous) -- local,
 *     no communication;
 *  2. inproc, or a launcher that put the whole world on this host (local size >= world size):
 *     one host -- local;
 *  3. the launcher's ZEN_LOCAL_RANK/ZEN_LOCAL_SIZE: one allgather over the communicator of
 *     (local rank, local size, host name hash, world rank). Ranks with the same host name form
 *     a host. When two of them have the same local rank, several hosts are emulated on one
 *     machine (scripts/cluster.sh): there ranks share a host when they also share world rank -
 *     local rank (such launchers number a host's ranks contiguously). A picture that does not add
 *     up (repeated local ranks within a host, more members than the local size, or on a
 *     communicator over the whole world fewer) makes every rank its own host, and says so.
 * Hosts are renumbered by their lowest communicator rank, so every rank holds the same table.
 * A caller may ask for emulated hosts of ranks_per_host consecutive ranks instead (local).
 */
#include <string.h>
#include <unistd.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/hash.h"
#include "common/log.h"

typedef struct hosts_cache {
    int *real;     /* [size] rank -> host from the sources above; NULL until computed */
    int *emulated; /* [size] the last ranks_per_host view */
} hosts_cache;

static void cache_free(void *p)
{
    hosts_cache *hc = p;
    if (!hc)
        return;
    zen__free(hc->real);
    zen__free(hc->emulated);
    zen__free(hc);
}

enum {
    LR_LOCAL_RANK,
    LR_LOCAL_SIZE,
    LR_HOST,
    LR_WORLD,
    LR_FIELDS
};

static int same_host(const uint64_t *a, const uint64_t *b, int refine)
{
    if (a[LR_HOST] != b[LR_HOST])
        return 0;
    return !refine || a[LR_WORLD] - a[LR_LOCAL_RANK] == b[LR_WORLD] - b[LR_LOCAL_RANK];
}

/* Number the hosts of the n records by lowest rank; 1 when local ranks repeat inside a host. */
static int number_hosts(const uint64_t *all, int n, int refine, int *host)
{
    int hosts = 0, repeats = 0;
    for (int r = 0; r < n; r++) {
        host[r] = -1;
        for (int q = 0; q < r && host[r] < 0; q++)
            if (same_host(all + LR_FIELDS * q, all + LR_FIELDS * r, refine))
                host[r] = host[q];
        if (host[r] < 0)
            host[r] = hosts++;
        for (int q = 0; q < r; q++)
            repeats |= host[q] == host[r] &&
                       all[LR_FIELDS * q + LR_LOCAL_RANK] == all[LR_FIELDS * r + LR_LOCAL_RANK];
    }
    return repeats;
}

static zen_status launcher_hosts(zen_comm *comm, int *host)
{
    int n = comm->size;
    char name[256] = { 0 };
    if (gethostname(name, sizeof name - 1) != 0)
        name[0] = '\0';
    uint64_t mine[LR_FIELDS] = { (uint64_t)zen_comm_local_rank(comm),
                                 (uint64_t)zen_comm_local_size(comm),
                                 zen__fnv1a(name, strlen(name), 0x4ae1),
                                 (uint64_t)comm->world_ranks[comm->rank] };
    uint64_t *all = zen__malloc_array((size_t)n * LR_FIELDS, sizeof *all);
    if (!all)
        return zen__fail(comm, ZEN_ENOMEM, "hosts: out of memory for %d ranks", n);
    zen_status st = zen_allgather(comm, mine, all, LR_FIELDS, ZEN_I64);
    if (st != ZEN_OK) {
        zen__free(all);
        return st;
    }
    int consistent = !number_hosts(all, n, 0, host) || !number_hosts(all, n, 1, host);
    int whole_world = n == comm->transport->size;
    for (int r = 0; r < n && consistent; r++) {
        uint64_t members = 0;
        for (int q = 0; q < n; q++)
            members += host[q] == host[r];
        uint64_t lsize = all[LR_FIELDS * r + LR_LOCAL_SIZE];
        consistent = all[LR_FIELDS * r + LR_LOCAL_RANK] < lsize && members <= lsize &&
                     (!whole_world || members == lsize);
    }
    if (!consistent) {
        ZEN_WARN("coll", "launcher host grouping is inconsistent; every rank counts as a host");
        for (int r = 0; r < n; r++)
            host[r] = r;
    }
    zen__free(all);
    return ZEN_OK;
}

/* The transport's table, through the communicator's world ranks, renumbered by lowest rank. */
static void transport_hosts(const zen_comm *comm, int *host)
{
    int hosts = 0;
    for (int r = 0; r < comm->size; r++) {
        int th = zen__transport_host(comm->transport, comm->world_ranks[r]);
        host[r] = -1;
        for (int q = 0; q < r && host[r] < 0; q++)
            if (zen__transport_host(comm->transport, comm->world_ranks[q]) == th)
                host[r] = host[q];
        if (host[r] < 0)
            host[r] = hosts++;
    }
}

static zen_status real_hosts(zen_comm *comm, int *host)
{
    if (zen__transport_host(comm->transport, comm->world_ranks[comm->rank]) >= 0) {
        transport_hosts(comm, host);
        return ZEN_OK;
    }
    if (zen__transport_traits(comm->kind)->reach == ZEN_REACH_THREADS ||
        zen_comm_local_size(comm) >= comm->transport->size) {
        memset(host, 0, (size_t)comm->size * sizeof *host);
        return ZEN_OK;
    }
    return launcher_hosts(comm, host);
}

static void describe(const zen_comm *comm, const int *host, zen_comm_hosts *out)
{
    memset(out, 0, sizeof *out);
    out->host_of = host;
    out->min_local = comm->size;
    out->sig = 0x9e3779b97f4a7c15ull;
    for (int r = 0; r < comm->size; r++) {
        if (host[r] + 1 > out->hosts)
            out->hosts = host[r] + 1;
        out->sig = zen_hash64(out->sig ^ (uint64_t)host[r], (uint64_t)r + 1);
    }
    out->host = host[comm->rank];
    for (int h = 0; h < out->hosts; h++) {
        int members = 0;
        for (int r = 0; r < comm->size; r++) {
            members += host[r] == h;
            if (r < comm->rank && h == out->host)
                out->local += host[r] == h;
        }
        if (members < out->min_local)
            out->min_local = members;
        if (members > out->max_local)
            out->max_local = members;
    }
}

zen_status zen__comm_hosts(zen_comm *comm, int ranks_per_host, zen_comm_hosts *out)
{
    if (!comm || !out || ranks_per_host < 0)
        return ZEN_EINVAL;
    hosts_cache *hc = zen__comm_attr_get(comm, ZEN_ATTR_HOSTS);
    if (!hc) {
        if (!(hc = zen__calloc(1, sizeof *hc)))
            return zen__fail(comm, ZEN_ENOMEM, "hosts: out of memory");
        zen__comm_attr_set(comm, ZEN_ATTR_HOSTS, hc, cache_free);
    }
    int n = comm->size;
    if (ranks_per_host > 0) {
        if (!hc->emulated && !(hc->emulated = zen__malloc_array((size_t)n, sizeof(int))))
            return zen__fail(comm, ZEN_ENOMEM, "hosts: out of memory for %d ranks", n);
        for (int r = 0; r < n; r++)
            hc->emulated[r] = r / ranks_per_host;
        describe(comm, hc->emulated, out);
        return ZEN_OK;
    }
    if (!hc->real) {
        int *host = zen__malloc_array((size_t)n, sizeof *host);
        if (!host)
            return zen__fail(comm, ZEN_ENOMEM, "hosts: out of memory for %d ranks", n);
        zen_status st = real_hosts(comm, host);
        if (st != ZEN_OK) {
            zen__free(host);
            return st;
        }
        hc->real = host;
    }
    describe(comm, hc->real, out);
    return ZEN_OK;
}
