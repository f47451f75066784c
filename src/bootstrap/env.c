#include "bootstrap/env.h"

#include <stdio.h>
#include <stdlib.h>

#include "bootstrap/env_slurm.h"
#include "common/launcher.h"
#include "common/log.h"
#include "common/tunables.h"

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

/*
 * The first of names that is set, checked against the bounds of the tunables row of names[0]
 * (the aliases of torchrun, Open MPI and PMI mean the same thing). A malformed value is an error
 * naming the variable, not a default: a rank that guessed its identity would join the wrong job
 * slot or wait for peers that never come.
 */
static zen_status read_int(const char *const *names, int *out, const char **from, const char **bad)
{
    const char *which = NULL;
    const char *v = first_set(names, &which);
    *out = -1;
    if (from)
        *from = which;
    if (!v)
        return ZEN_OK;
    long x;
    char why[160];
    if (zen__param_check_long(names[0] + 4, v, &x, why, sizeof why) != 0) {
        ZEN_ERROR("init", "%s='%s' is malformed: %s", which, v, why);
        *bad = which;
        return ZEN_EINVAL;
    }
    *out = (int)x;
    return ZEN_OK;
}

/* Host and port of rank 0: MASTER_ADDR/MASTER_PORT, else a Slurm step's, else localhost:29500. */
static zen_status read_master(zen_env_info *info, int step, const char **bad)
{
    static const char *const addr_vars[] = { "ZEN_MASTER_ADDR", "MASTER_ADDR", NULL };
    static const char *const port_vars[] = { "ZEN_MASTER_PORT", "MASTER_PORT", NULL };
    zen_status st = read_int(port_vars, &info->master_port, NULL, bad);
    if (st == ZEN_OK && info->master_port < 0)
        st = step ? zen__env_slurm_master_port(&info->master_port, bad) : ZEN_OK;
    if (st != ZEN_OK)
        return st;
    if (info->master_port < 0)
        info->master_port = 29500;
    const char *which = NULL;
    const char *addr = first_set(addr_vars, &which);
    if (!addr && step) {
        if ((st = zen__env_slurm_master_addr(info->master_addr, sizeof info->master_addr, bad)) !=
            ZEN_OK)
            return st;
        addr = info->master_addr;
        which = "SLURM_STEP_NODELIST";
    }
    char why[160];
    const char *addr_bad = addr ? zen__param_check("MASTER_ADDR", addr, why, sizeof why) : NULL;
    if (addr_bad) {
        ZEN_ERROR("init", "%s='%s' is malformed: %s", which, addr, addr_bad);
        *bad = which;
        return ZEN_EINVAL;
    }
    if (addr != info->master_addr)
        snprintf(info->master_addr, sizeof info->master_addr, "%s", addr ? addr : "127.0.0.1");
    return ZEN_OK;
}

/*
 * Each fact comes from the first of its variables that is set: zen's, torchrun's, Open MPI's,
 * PMI's, PMIx's, then a Slurm step's (env_slurm.h). Explicit variables therefore win over what
 * Slurm says, fact by fact, and mpirun inside an allocation keeps its own ranks.
 */
zen_status zen__env_read(zen_env_info *info, const char **bad)
{
    int step = zen__env_slurm_step();
    const char *const rank_vars[] = { "ZEN_RANK", "RANK",      "OMPI_COMM_WORLD_RANK",
                                      "PMI_RANK", "PMIX_RANK", step ? "SLURM_PROCID" : NULL,
                                      NULL };
    const char *const size_vars[] = { "ZEN_WORLD_SIZE",
                                      "WORLD_SIZE",
                                      "OMPI_COMM_WORLD_SIZE",
                                      "PMI_SIZE",
                                      step ? "SLURM_STEP_NUM_TASKS" : NULL,
                                      NULL };
    const char *const lrank_vars[] = { "ZEN_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                       step ? "SLURM_LOCALID" : NULL, NULL };
    static const char *const lsize_vars[] = { "ZEN_LOCAL_SIZE", "LOCAL_WORLD_SIZE",
                                              "OMPI_COMM_WORLD_LOCAL_SIZE", NULL };
    const char *dummy = NULL;
    if (!bad)
        bad = &dummy;
    *bad = NULL;
    info->rank_from = NULL;
    info->slurm_step = step;
    zen_status st;
    if ((st = read_int(rank_vars, &info->rank, &info->rank_from, bad)) != ZEN_OK ||
        (st = read_int(size_vars, &info->world_size, NULL, bad)) != ZEN_OK ||
        (st = read_int(lrank_vars, &info->local_rank, NULL, bad)) != ZEN_OK ||
        (st = read_int(lsize_vars, &info->local_size, NULL, bad)) != ZEN_OK)
        return st;
    if (info->local_size < 0 && step &&
        (st = zen__env_slurm_local_size(&info->local_size, bad)) != ZEN_OK)
        return st;
    if ((st = read_master(info, step, bad)) != ZEN_OK)
        return st;
    info->launched_by_mpi = zen__env_mpi_launcher();
    if (info->rank >= 0 && info->world_size > 0 && info->rank >= info->world_size) {
        *bad = "RANK >= WORLD_SIZE";
        return ZEN_EINVAL;
    }
    return ZEN_OK;
}
