#include "transport/transport.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "transport/registry.h"

void zen__transport_base_init(zen_transport *t, const zen_transport_ops *ops, void *impl, int rank,
                              int size)
{
    t->ops = ops;
    t->impl = impl;
    t->rank = rank;
    t->size = size;
    t->local_rank = rank;
    t->local_size = size;
    t->host_of = NULL;
    t->nhosts = 0;
    t->err[0] = '\0';
    pthread_mutex_init(&t->err_lock, NULL);
}

void zen__transport_base_release(zen_transport *t)
{
    pthread_mutex_destroy(&t->err_lock);
}

zen_status zen__transport_fail(zen_transport *t, zen_status status, const char *fmt, ...)
{
    char detail[sizeof t->err];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&t->err_lock);
    snprintf(t->err, sizeof t->err, "rank %d: %s", t->rank, detail);
    pthread_mutex_unlock(&t->err_lock);
    ZEN_DEBUG("transport", "%s: %s", zen_status_name(status), detail);
    return status;
}

void zen__transport_last_error(zen_transport *t, char *out, size_t size)
{
    pthread_mutex_lock(&t->err_lock);
    snprintf(out, size, "%s", t->err);
    pthread_mutex_unlock(&t->err_lock);
}

int zen__transport_host(const zen_transport *t, int r)
{
    if (!t || !t->host_of || r < 0 || r >= t->size)
        return -1;
    return t->host_of[r];
}

zen_status zen__transport_need_rank(const zen_transport_open_args *a, const char *name)
{
    if (a->rank >= 0 && a->size >= 1)
        return ZEN_OK;
    ZEN_ERROR("init",
              "%s transport needs a rank and world size: set ZEN_RANK and ZEN_WORLD_SIZE (or "
              "RANK/WORLD_SIZE), or use `zen launch`",
              name);
    return ZEN_EINVAL;
}
