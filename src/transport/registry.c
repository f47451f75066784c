/*
 * The list of transports (registry.h): one line per transport, its descriptor defined in its own
 * file. Order matters only for AUTO, which takes the first row that says the process was
 * launched for it.
 */
#include "transport/registry.h"

#include <string.h>

#include "common/log.h"

extern const zen_transport_desc zen__transport_inproc_desc; /* inproc.c */
extern const zen_transport_desc zen__transport_tcp_desc;    /* tcp.c */
extern const zen_transport_desc zen__transport_shm_desc;    /* shm.c */
extern const zen_transport_desc zen__transport_mixed_desc;  /* shm.c */
extern const zen_transport_desc zen__transport_mpi_desc;    /* mpi.c */
extern const zen_transport_desc zen__transport_faulty_desc; /* faulty.c */

static const zen_transport_desc *const ROWS[] = {
    &zen__transport_inproc_desc, &zen__transport_tcp_desc, &zen__transport_shm_desc,
    &zen__transport_mixed_desc,  &zen__transport_mpi_desc, &zen__transport_faulty_desc,
};

#define NROWS (sizeof ROWS / sizeof ROWS[0])

size_t zen__transport_count(void)
{
    return NROWS;
}

const zen_transport_desc *zen__transport_at(size_t i)
{
    return i < NROWS ? ROWS[i] : NULL;
}

const zen_transport_desc *zen__transport_desc(zen_transport_kind kind)
{
    for (size_t i = 0; i < NROWS; i++)
        if (ROWS[i]->open && ROWS[i]->kind == kind)
            return ROWS[i];
    return NULL;
}

const zen_transport_desc *zen__transport_named(const char *name)
{
    for (size_t i = 0; name && i < NROWS; i++)
        if (ROWS[i]->open && strcmp(ROWS[i]->name, name) == 0)
            return ROWS[i];
    return NULL;
}

const zen_transport_traits *zen__transport_traits(zen_transport_kind kind)
{
    static const zen_transport_traits none = { .wire_copies = -1 }; /* a network stack */
    const zen_transport_desc *d = zen__transport_desc(kind);
    return d ? &d->traits : &none;
}

const char *zen_transport_name(zen_transport_kind kind)
{
    if (kind == ZEN_TRANSPORT_AUTO)
        return "auto";
    const zen_transport_desc *d = zen__transport_desc(kind);
    return d ? d->name : "?";
}

zen_status zen__transport_wrap(zen_transport **t)
{
    zen_status st = ZEN_OK;
    for (size_t i = 0; i < NROWS && st == ZEN_OK; i++)
        if (ROWS[i]->wrap)
            st = ROWS[i]->wrap(t);
    return st;
}
