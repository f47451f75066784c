/* ZEN_TRANSPORT, checked against the transport registry (the tunables table, below transport,
 * only checks that it is a word). */
#ifndef ZEN_COLL_TRANSPORT_ENV_H
#define ZEN_COLL_TRANSPORT_ENV_H

#include <zen/zen.h>

/* The process transport ZEN_TRANSPORT asks for: MIXED for auto (shm inside a host, tcp across),
 * else the kind of the registry's process transport of that name (any case). A word that names
 * none is ignored with one warning per process and means auto, as the tunables table does for
 * its own malformed values. Thread safe. */
zen_transport_kind zen__coll_transport_from_env(void);

#endif
