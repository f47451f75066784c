/*
 * store.h - create a communicator through a caller-supplied key-value store.
 *
 * Frameworks that already run a rendezvous service (torch.distributed's c10d Store, a job
 * scheduler's KV, a shared file system) hand zen that service instead of a second master port:
 * each rank publishes how to reach it under a key, reads every other rank's key, and the
 * transport builds its connections from that table. Nothing else goes through the store.
 */
#ifndef ZEN_STORE_H
#define ZEN_STORE_H

#include <zen/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A key-value store shared by all ranks. Keys are NUL-terminated ASCII; values are bytes.
 *  set: store bytes under key (overwrite allowed). Returns ZEN_OK or an error status.
 *  get: wait at most timeout_s seconds until key exists, then copy at most capacity bytes of its
 *       value into value and the value's full length into *bytes. ZEN_ETIMEDOUT when the key did
 *       not appear in time; ZEN_EPROTO when the value is longer than capacity.
 * zen calls them from the thread that creates the communicator only, and only during
 * zen_comm_create_with_store; ctx is passed through untouched. While a rank waits, zen calls get
 * with timeouts of at most 0.5 s and rewrites that rank's own key every 0.5 s (the time it will
 * still wait, so that late ranks give up together with it). A store (or a key prefix of one)
 * serves one communicator creation: keys of an earlier creation would be read as this one's.
 */
typedef struct zen_store {
    void *ctx;
    zen_status (*set)(void *ctx, const char *key, const void *value, size_t bytes);
    zen_status (*get)(void *ctx, const char *key, void *value, size_t capacity, size_t *bytes,
                      double timeout_s);
} zen_store;

/*
 * Like zen_comm_create, with the rendezvous through store instead of a master address and port.
 * opts->rank and opts->world_size are required (>= 0, > 0). opts->transport selects the
 * transport: TCP gives the tcp full mesh (this rank listens on ZEN_SOCKET_IFADDR, else on the local
 * address that routes to opts->master_addr or MASTER_ADDR/ZEN_MASTER_ADDR, else on 127.0.0.1, and
 * publishes "zen/tcp/<rank>"); SHM and MIXED run the host exchange over that mesh (shared memory
 * among the ranks of one host, tcp across hosts); AUTO takes ZEN_TRANSPORT (default auto = MIXED).
 * INPROC and MPI need no rendezvous and return ZEN_EUNSUPPORTED here. Collective over all ranks
 * of the store. Ownership and failure as for
 * zen_comm_create; ZEN_EINVAL for a NULL store, a missing set/get or a missing rank/world size.
 */
ZEN_API zen_status zen_comm_create_with_store(const zen_comm_options *opts, const zen_store *store,
                                              zen_comm **out);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_STORE_H */
