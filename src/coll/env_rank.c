/* zen_comm_env_rank: the launcher's rank for programs that choose between threads and processes. */
#include <zen/comm.h>

#include "bootstrap/env.h"

zen_status zen_comm_env_rank(int *rank)
{
    if (!rank)
        return ZEN_EINVAL;
    zen_env_info env;
    zen_status st = zen__env_read(&env, NULL);
    *rank = st == ZEN_OK ? env.rank : -1;
    return st;
}
