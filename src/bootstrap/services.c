/* The bootstrap's services for the transports' open functions (services.h). */
#include "bootstrap/services.h"

#include "bootstrap/hosts.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/store.h"

static zen_status mesh(const zen_transport_open_args *a, int *fds, char *err, size_t err_size)
{
    if (a->store)
        return zen__store_rendezvous(a->store, a->rank, a->size, a->master_addr, a->timeout_s, fds,
                                     err, err_size);
    return zen__rendezvous(a->rank, a->size, a->master_addr, a->master_port, a->timeout_s, fds, err,
                           err_size);
}

static zen_status hosts(const zen_transport_open_args *a, zen_transport_kind want,
                        zen_transport **out, zen_transport_kind *kind)
{
    return zen__bootstrap_host_transport(want, a->rank, a->size, a->master_addr, a->master_port,
                                         a->store, a->timeout_s, out, kind);
}

const zen_bootstrap_services zen__bootstrap_services = { .mesh = mesh, .hosts = hosts };
