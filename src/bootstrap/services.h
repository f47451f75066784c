/*
 * What the bootstrap offers the transports that connect processes (registry.h,
 * zen_bootstrap_services): the mesh of sockets and the host-aware setup. The communicator hands
 * this table to a transport's open function, so the transports call the bootstrap without
 * naming it (the layers stay common <- transport <- bootstrap).
 */
#ifndef ZEN_BOOTSTRAP_SERVICES_H
#define ZEN_BOOTSTRAP_SERVICES_H

#include "transport/registry.h"

extern const zen_bootstrap_services zen__bootstrap_services;

#endif
