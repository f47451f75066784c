/* zen_comm_env_rank and zen_comm_env_launch: the launcher's facts as zen_comm_create reads them. */
#include <stdio.h>
#include <string.h>

#include <zen/comm.h>

#include "bootstrap/env.h"
#include "common/options.h"

zen_status zen_comm_env_rank(int *rank)
{
    if (!rank)
        return ZEN_EINVAL;
    zen_env_info env;
    zen_status st = zen__env_read(&env, NULL);
    *rank = st == ZEN_OK ? env.rank : -1;
    return st;
}

zen_status zen_comm_env_launch(zen_launch_env *out)
{
    if (!out || !ZEN_OPTIONS_SIZE_OK(out))
        return ZEN_EINVAL;
    zen_env_info env;
    zen_status st = zen__env_read(&env, NULL);
    if (st != ZEN_OK)
        return st;
    out->size = sizeof *out;
    out->rank = env.rank;
    out->world_size = env.world_size;
    out->local_rank = env.local_rank;
    out->local_size = env.local_size;
    snprintf(out->master_addr, sizeof out->master_addr, "%s", env.master_addr);
    out->master_port = env.master_port;
    out->slurm_step = env.slurm_step;
    snprintf(out->rank_var, sizeof out->rank_var, "%s", env.rank_from ? env.rank_from : "");
    return ZEN_OK;
}
