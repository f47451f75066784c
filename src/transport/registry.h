/*
 * The table of transports. Each transport describes itself in one descriptor defined in its own
 * file (inproc.c, tcp.c, shm.c, mpi.c, faulty.c): its name, its public kind, how to bring it up
 * and its traits, the figures that the choices above it read (the sparse cost model's latency,
 * bandwidth and CPU per byte, where it reaches, single copy). registry.c lists the descriptors;
 * nothing else names a transport kind in a switch, so a new transport is its own files, one line
 * in registry.c and its test (docs/architecture.md, "Adding a transport"). test_transport_registry
 * walks the table and fails on a row without its name, kind, open function or traits.
 */
#ifndef ZEN_TRANSPORT_REGISTRY_H
#define ZEN_TRANSPORT_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include <zen/zen.h>

#include "transport/transport.h"

/* Where a transport's ranks may live. */
typedef enum zen_transport_reach {
    ZEN_REACH_NONE = 0,    /* not set: a row without traits (the registry test refuses it) */
    ZEN_REACH_THREADS = 1, /* threads of one process (a world shared in memory) */
    ZEN_REACH_HOST = 2,    /* processes of one host */
    ZEN_REACH_HOSTS = 3    /* processes on any hosts */
} zen_transport_reach;

typedef struct zen_transport_traits {
    zen_transport_reach reach;
    /* The defaults of the sparse cost model (ZEN_NET_LAT_US and ZEN_NET_GBPS override them):
     * one small message end to end, and the point-to-point bandwidth of a large one. */
    double latency_us;
    double gbps;
    /* CPU copies each byte on the wire costs the ranks: 0 when the bandwidth above is the ranks'
     * own memcpy (so it shrinks with their share of the cores), 2 through a shared ring (in and
     * out), -1 for a network stack (ZEN_SPARSE_NS_PER_WIRE_BYTE). */
    int wire_copies;
    bool single_copy;      /* a large message is copied once, by one side (no staging) */
    bool store_rendezvous; /* zen_comm_create_with_store can bring it up */
    bool native_allreduce; /* allreduce may go to the transport's own (ZEN_MPI_NATIVE=1) */
} zen_transport_traits;

/* What an open function gets: the job's facts and, for transports that connect processes, the
 * bootstrap's services (the communicator fills them; a transport never includes bootstrap). */
typedef struct zen_transport_open_args zen_transport_open_args;

typedef struct zen_bootstrap_services {
    /* The full mesh of sockets (fds[p] to peer p, -1 at this rank), through the store when
     * a->store is set, else through rank 0's master port. err names the peer on failure. */
    zen_status (*mesh)(const zen_transport_open_args *a, int *fds, char *err, size_t err_size);
    /* Mesh, host exchange and the transport per host: shm inside, tcp across. want: SHM (all on
     * one host, or refused) or MIXED; *kind gets what the job uses (SHM, TCP or MIXED). */
    zen_status (*hosts)(const zen_transport_open_args *a, zen_transport_kind want,
                        zen_transport **out, zen_transport_kind *kind);
} zen_bootstrap_services;

struct zen_transport_open_args {
    int rank, size;                /* this process's world rank and the world size (-1, 0: unset) */
    zen_inproc_world *world;       /* inproc: the shared world (not owned) */
    const char *master_addr;       /* rendezvous through rank 0 */
    int master_port;               /* 1..65535 unless store is set */
    const struct zen_store *store; /* rendezvous through a caller's key-value store, or NULL */
    double timeout_s;
    const zen_bootstrap_services *boot;
};

typedef struct zen_transport_desc {
    const char *name;        /* ZEN_TRANSPORT's word and zen_transport_name's answer */
    zen_transport_kind kind; /* ZEN_TRANSPORT_AUTO for a wrapper */
    /* An endpoint: bring it up. *kind may be refined (shm+tcp finds one host: shm). */
    zen_status (*open)(const zen_transport_open_args *a, zen_transport **out,
                       zen_transport_kind *kind);
    /* A wrapper (faulty): replace *t by a wrapper when the environment asks, else leave it. On
     * failure *t is destroyed and set to NULL. */
    zen_status (*wrap)(zen_transport **t);
    /* Optional: 1 when this process was started for this transport (mpirun for mpi), which
     * makes it AUTO's choice for processes. */
    int (*launched)(void);
    zen_transport_traits traits; /* endpoints */
} zen_transport_desc;

/* The rows, in order. Thread safe (constant). */
size_t zen__transport_count(void);
const zen_transport_desc *zen__transport_at(size_t i);

/* The endpoint of kind, or NULL (AUTO, or a kind no row has). */
const zen_transport_desc *zen__transport_desc(zen_transport_kind kind);

/* The endpoint named name ("tcp"), or NULL. */
const zen_transport_desc *zen__transport_named(const char *name);

/* The traits of kind; a row of zeros (reach NONE) for AUTO or an unknown kind. */
const zen_transport_traits *zen__transport_traits(zen_transport_kind kind);

/* For open functions of process transports: ZEN_EINVAL (logged, saying how to set them) unless
 * a->rank and a->size are set; name is the transport's. In transport.c with the other helpers
 * of the transports: the registry refers to the transports, never the other way. */
zen_status zen__transport_need_rank(const zen_transport_open_args *a, const char *name);

/* Apply every wrapper row to *t (see zen_transport_desc.wrap). */
zen_status zen__transport_wrap(zen_transport **t);

#endif
