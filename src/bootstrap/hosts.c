#include "bootstrap/hosts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/rendezvous.h"
#include "bootstrap/store.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "transport/shm.h"
#include "transport/tcp_sock.h"

#define HOST_MAGIC   0x5453485au /* "ZHST" */
#define HOST_VERSION 1u
#define HEAD_BYTES   16
#define MSG_BYTES    (HEAD_BYTES + ZEN_HOST_ID_MAX + sizeof(zen_shm_blob))

void zen__host_identity(char *out, size_t cap)
{
    const char *fixed = zen__param_str("HOST_ID");
    if (fixed && *fixed) {
        snprintf(out, cap, "%s", fixed);
        return;
    }
    char host[64] = "";
    char boot[48] = "";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f))
            boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\r\n")] = '\0';
    snprintf(out, cap, "%s/%s", host, boot);
}

/* Every rank sends (identity, blob) to every peer, then reads theirs: 208 bytes each, far below
 * a socket buffer, so writing all before reading cannot block. */
static zen_status exchange(int rank, int size, int *fds, int64_t deadline, const char *id,
                           const zen_shm_blob *mine, char (*ids)[ZEN_HOST_ID_MAX],
                           zen_shm_blob *blobs)
{
    unsigned char msg[MSG_BYTES];
    memset(msg, 0, sizeof msg);
    zen_put_u32(msg, HOST_MAGIC);
    zen_put_u16(msg + 4, HOST_VERSION);
    zen_put_u32(msg + 8, (uint32_t)rank);
    zen_put_u32(msg + 12, (uint32_t)size);
    snprintf((char *)msg + HEAD_BYTES, ZEN_HOST_ID_MAX, "%s", id);
    memcpy(msg + HEAD_BYTES + ZEN_HOST_ID_MAX, mine, sizeof *mine);
    snprintf(ids[rank], ZEN_HOST_ID_MAX, "%s", id);
    blobs[rank] = *mine;
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        struct iovec iov = { .iov_base = msg, .iov_len = sizeof msg };
        int rc = zen__sock_writev_all(fds[p], &iov, 1, 0, deadline);
        if (rc < 0) {
            ZEN_ERROR("bootstrap", "rank %d: sending the host identity to rank %d failed: %s", rank,
                      p, strerror(-rc));
            return ZEN_EPEER;
        }
    }
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        unsigned char in[MSG_BYTES];
        int rc = zen__sock_read_all(fds[p], in, sizeof in, deadline);
        if (rc < 0) {
            ZEN_ERROR("bootstrap",
                      "rank %d: no host identity from rank %d (%s): do all ranks use the same "
                      "transport (ZEN_TRANSPORT / --transport)?",
                      rank, p, rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
            return rc == -ETIMEDOUT ? ZEN_ETIMEDOUT : ZEN_EPEER;
        }
        if (zen_get_u32(in) != HOST_MAGIC || zen_get_u16(in + 4) != HOST_VERSION ||
            zen_get_u32(in + 8) != (uint32_t)p || zen_get_u32(in + 12) != (uint32_t)size) {
            ZEN_ERROR("bootstrap",
                      "rank %d: rank %d sent a malformed host identity (another transport or "
                      "zen version?)",
                      rank, p);
            return ZEN_EPROTO;
        }
        memcpy(ids[p], in + HEAD_BYTES, ZEN_HOST_ID_MAX);
        ids[p][ZEN_HOST_ID_MAX - 1] = '\0';
        memcpy(&blobs[p], in + HEAD_BYTES + ZEN_HOST_ID_MAX, sizeof blobs[p]);
        blobs[p].sock_name[sizeof blobs[p].sock_name - 1] = '\0';
    }
    return ZEN_OK;
}

/* host_of[p]: index of rank p's host, numbered in order of first appearance (same everywhere). */
static int group_hosts(int size, char (*ids)[ZEN_HOST_ID_MAX], int *host_of)
{
    int nhosts = 0;
    for (int p = 0; p < size; p++) {
        host_of[p] = -1;
        for (int q = 0; q < p && host_of[p] < 0; q++)
            if (strcmp(ids[p], ids[q]) == 0)
                host_of[p] = host_of[q];
        if (host_of[p] < 0)
            host_of[p] = nhosts++;
    }
    return nhosts;
}

/* "2, 5, 7" for the ranks not on rank's host. */
static void list_remote(int size, int rank, const int *host_of, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (int p = 0; p < size && used + 16 < cap; p++)
        if (host_of[p] != host_of[rank])
            used += (size_t)snprintf(out + used, cap - used, "%s%d", used ? ", " : "", p);
}

static zen_status choose(zen_transport_kind want, int rank, int size, int *fds, double timeout_s,
                         char (*ids)[ZEN_HOST_ID_MAX], const zen_shm_blob *blobs, zen_shm_boot **b,
                         zen_transport **out, zen_transport_kind *kind)
{
    int *host_of = zen__malloc_array((size_t)size, sizeof *host_of);
    if (!host_of)
        return ZEN_ENOMEM;
    int nhosts = group_hosts(size, ids, host_of);
    zen_status st = ZEN_OK;
    if (want == ZEN_TRANSPORT_SHM && nhosts > 1) {
        char remote[256];
        list_remote(size, rank, host_of, remote, sizeof remote);
        ZEN_ERROR("bootstrap",
                  "rank %d: --transport shm needs every rank on this host (%s), but rank(s) %s "
                  "are on other hosts: use --transport auto (shm inside hosts, tcp across) or "
                  "tcp",
                  rank, ids[rank], remote);
        st = ZEN_EINVAL;
        for (int p = 0; p < size; p++)
            if (fds[p] >= 0)
                close(fds[p]);
    } else if (nhosts == size && size > 1) {
        /* one rank per host: nothing to share */
        *kind = ZEN_TRANSPORT_TCP;
        zen__shm_boot_cancel(*b);
        *b = NULL;
        st = zen__transport_tcp_create(rank, size, fds, timeout_s, out);
    } else {
        *kind = nhosts == 1 ? ZEN_TRANSPORT_SHM : ZEN_TRANSPORT_MIXED;
        char err[512];
        zen_shm_boot *boot = *b;
        *b = NULL;
        st = zen__transport_shm_create(rank, size, fds, host_of, blobs, boot, timeout_s, out, err,
                                       sizeof err);
        if (st != ZEN_OK)
            ZEN_ERROR("bootstrap", "%s", err[0] ? err : "shm transport setup failed");
    }
    zen__free(host_of);
    return st;
}

zen_status zen__bootstrap_host_transport(zen_transport_kind want, int rank, int size,
                                         const char *master_addr, int master_port,
                                         const zen_store *store, double timeout_s,
                                         zen_transport **out, zen_transport_kind *kind)
{
    *out = NULL;
    if (!store && (master_port < 1 || master_port > 65535)) {
        ZEN_ERROR("init", "master port %d is not a port number", master_port);
        return ZEN_EINVAL;
    }
    int *fds = zen__malloc_array((size_t)size, sizeof *fds);
    char(*ids)[ZEN_HOST_ID_MAX] = zen__calloc((size_t)size, sizeof *ids);
    zen_shm_blob *blobs = zen__calloc((size_t)size, sizeof *blobs);
    zen_shm_boot *b = NULL;
    zen_shm_blob mine;
    zen_status st = fds && ids && blobs ? ZEN_OK : ZEN_ENOMEM;
    /* listen before the exchange: a peer may connect as soon as it has our blob */
    if (st == ZEN_OK && (st = zen__shm_boot_begin(&b, &mine)) != ZEN_OK)
        ZEN_ERROR("bootstrap", "rank %d: cannot open the shm setup socket", rank);
    char err[512];
    int64_t t0 = zen_now_ns();
    if (st == ZEN_OK)
        st = store ? zen__store_rendezvous(store, rank, size, master_addr, timeout_s, fds, err,
                                           sizeof err)
                   : zen__rendezvous(rank, size, master_addr, master_port, timeout_s, fds, err,
                                     sizeof err);
    if (st == ZEN_OK) {
        char id[ZEN_HOST_ID_MAX];
        zen__host_identity(id, sizeof id);
        int64_t deadline = zen_deadline_after(timeout_s);
        st = exchange(rank, size, fds, deadline, id, &mine, ids, blobs);
        if (st == ZEN_OK)
            st = choose(want, rank, size, fds, timeout_s, ids, blobs, &b, out, kind);
        else
            for (int p = 0; p < size; p++)
                if (fds[p] >= 0)
                    close(fds[p]);
    }
    if (st == ZEN_OK)
        ZEN_INFO("init", "rank %d of %d connected to its peers in %.3f s (%s)", rank, size,
                 (double)(zen_now_ns() - t0) / 1e9, zen_transport_name(*kind));
    zen__shm_boot_cancel(b);
    zen__free(fds);
    zen__free(ids);
    zen__free(blobs);
    return st;
}
