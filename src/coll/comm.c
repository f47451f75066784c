/*
 * The communicator struct seen from below: error recording (zen__fail), the public getters,
 * statistics, arrival stamps and attribute slots. Every collective calls these; they call no
 * collective (creation, split and destruction are in comm_lifetime.c, above the collectives).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coll/comm_internal.h"
#include "common/log.h"
#include "common/thread_sched.h"

zen_status zen__fail(zen_comm *comm, zen_status status, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(comm->last_error, sizeof comm->last_error, "rank %d: %s", comm->rank, detail);
    ZEN_DEBUG("coll", "%s: %s", zen_status_name(status), comm->last_error);
    return status;
}

int zen_comm_rank(const zen_comm *comm)
{
    return comm ? comm->rank : -1;
}

int zen_comm_size(const zen_comm *comm)
{
    return comm ? comm->size : 0;
}

zen_transport_kind zen_comm_transport(const zen_comm *comm)
{
    return comm ? comm->kind : ZEN_TRANSPORT_AUTO;
}

double zen_comm_timeout(const zen_comm *comm)
{
    return comm ? comm->timeout_s : 0;
}

int zen_comm_thread_hint(void)
{
    return zen__thread_comm_slice();
}

/* All ranks are threads of this process: the communicator is the host. */
static int threads(const zen_comm *comm)
{
    return zen__transport_traits(comm->kind)->reach == ZEN_REACH_THREADS;
}

int zen_comm_local_rank(const zen_comm *comm)
{
    if (!comm)
        return -1;
    return threads(comm) ? comm->rank : comm->transport->local_rank;
}

int zen_comm_local_size(const zen_comm *comm)
{
    if (!comm)
        return 0;
    if (threads(comm))
        return comm->size;
    return comm->transport->local_size;
}

const char *zen_comm_last_error(const zen_comm *comm)
{
    return comm ? comm->last_error : "no communicator";
}

zen_status zen_comm_get_stats(const zen_comm *comm, zen_comm_stats *out)
{
    if (!comm || !out)
        return ZEN_EINVAL;
    *out = comm->stats;
    return ZEN_OK;
}

void zen_comm_reset_stats(zen_comm *comm)
{
    if (comm)
        memset(&comm->stats, 0, sizeof comm->stats);
}

zen_status zen_comm_arrivals(const zen_comm *comm, zen_arrival *out, size_t max, size_t *count)
{
    if (!comm || (!out && max) || !count)
        return ZEN_EINVAL;
    uint64_t have =
        comm->arrival_count < ZEN_ARRIVAL_HISTORY ? comm->arrival_count : ZEN_ARRIVAL_HISTORY;
    size_t n = have < max ? (size_t)have : max;
    for (size_t i = 0; i < n; i++)
        out[i] = comm->arrivals[(comm->arrival_count - n + i) % ZEN_ARRIVAL_HISTORY];
    *count = n;
    return ZEN_OK;
}

void *zen__comm_attr_get(const zen_comm *comm, zen_comm_attr_key key)
{
    if (!comm || (unsigned)key >= ZEN_ATTR_COUNT)
        return NULL;
    return comm->attrs[key].value;
}

void zen__comm_attr_set(zen_comm *comm, zen_comm_attr_key key, void *value,
                        void (*release)(void *value))
{
    if (!comm || (unsigned)key >= ZEN_ATTR_COUNT)
        return;
    zen_comm_attr *a = &comm->attrs[key];
    if (a->release && a->value)
        a->release(a->value);
    a->value = value;
    a->release = release;
}
