#include "bootstrap/env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int zen__parse_int(const char *s, long lo, long hi, int *out)
{
    if (!s || !*s)
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* First variable of names that is set; *which gets its name. */
static const char *first_set(const char *const *names, const char **which)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            *which = *names;
            return v;
        }
    }
    return NULL;
}

static zen_status read_int(const char *const *names, long lo, long hi, int *out, const char **bad)
{
    const char *which = NULL;
    const char *v = first_set(names, &which);
    *out = -1;
    if (!v)
        return ZEN_OK;
    if (zen__parse_int(v, lo, hi, out) != 0) {
        *bad = which;
        return ZEN_EINVAL;
    }
    return ZEN_OK;
}

zen_status zen__env_read(zen_env_info *info, const char **bad)
{
    static const char *const rank_vars[] = { "ZEN_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                             NULL };
    static const char *const size_vars[] = { "ZEN_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                             "PMI_SIZE", NULL };
    static const char *const lrank_vars[] = { "ZEN_LOCAL_RANK", "LOCAL_RANK",
                                              "OMPI_COMM_WORLD_LOCAL_RANK", NULL };
    static const char *const lsize_vars[] = { "ZEN_LOCAL_SIZE", "LOCAL_WORLD_SIZE",
                                              "OMPI_COMM_WORLD_LOCAL_SIZE", NULL };
    static const char *const addr_vars[] = { "ZEN_MASTER_ADDR", "MASTER_ADDR", NULL };
    static const char *const port_vars[] = { "ZEN_MASTER_PORT", "MASTER_PORT", NULL };
    const char *dummy = NULL;
    if (!bad)
        bad = &dummy;
    *bad = NULL;
    zen_status st;
    if ((st = read_int(rank_vars, 0, 1 << 20, &info->rank, bad)) != ZEN_OK ||
        (st = read_int(size_vars, 1, 1 << 20, &info->world_size, bad)) != ZEN_OK ||
        (st = read_int(lrank_vars, 0, 1 << 20, &info->local_rank, bad)) != ZEN_OK ||
        (st = read_int(lsize_vars, 1, 1 << 20, &info->local_size, bad)) != ZEN_OK ||
        (st = read_int(port_vars, 1, 65535, &info->master_port, bad)) != ZEN_OK)
        return st;
    const char *which = NULL;
    const char *addr = first_set(addr_vars, &which);
    snprintf(info->master_addr, sizeof info->master_addr, "%s", addr ? addr : "127.0.0.1");
    if (info->master_port < 0)
        info->master_port = 29500;
    info->launched_by_mpi = getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL;
    if (info->rank >= 0 && info->world_size > 0 && info->rank >= info->world_size) {
        *bad = "RANK >= WORLD_SIZE";
        return ZEN_EINVAL;
    }
    return ZEN_OK;
}
