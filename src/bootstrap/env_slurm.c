#include "bootstrap/env_slurm.h"

#include <stdlib.h>

#include "bootstrap/nodelist.h"
#include "common/log.h"

static const char *nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A non-negative decimal (up to 18 digits) of variable name into *out. */
static int read_count(const char *name, long *out)
{
    const char *v = nonempty(name);
    if (!v)
        return -1;
    long x = 0;
    int n = 0;
    for (; *v; v++, n++) {
        if (*v < '0' || *v > '9' || n == 18)
            return -1;
        x = x * 10 + (*v - '0');
    }
    *out = x;
    return 0;
}

int zen__env_slurm_step(void)
{
    return nonempty("SLURM_STEP_NUM_TASKS") && nonempty("SLURM_PROCID");
}

zen_status zen__env_slurm_local_size(int *out, const char **bad)
{
    *out = -1;
    const char *tpn = nonempty("SLURM_STEP_TASKS_PER_NODE");
    long node = 0, tasks = 0;
    if (!tpn)
        return ZEN_OK;
    if (read_count("SLURM_NODEID", &node) != 0) {
        ZEN_ERROR("init", "SLURM_NODEID='%s' is not a node number",
                  getenv("SLURM_NODEID") ? getenv("SLURM_NODEID") : "");
        *bad = "SLURM_NODEID";
        return ZEN_EINVAL;
    }
    char why[160];
    if (zen__slurm_tasks_on_node(tpn, node, &tasks, why, sizeof why) != ZEN_OK || tasks < 1 ||
        tasks > (1 << 20)) {
        ZEN_ERROR("init", "SLURM_STEP_TASKS_PER_NODE='%s' (node %ld) is malformed: %s", tpn, node,
                  why[0] ? why : "task count out of range");
        *bad = "SLURM_STEP_TASKS_PER_NODE";
        return ZEN_EINVAL;
    }
    *out = (int)tasks;
    return ZEN_OK;
}

zen_status zen__env_slurm_master_addr(char *addr, size_t cap, const char **bad)
{
    static const char *const names[] = { "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                         "SLURM_NODELIST" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *list = nonempty(names[i]);
        if (!list)
            continue;
        char why[160];
        long count = 0;
        if (zen__nodelist_host(list, 0, addr, cap, &count, why, sizeof why) != ZEN_OK) {
            ZEN_ERROR("init", "%s='%s' is malformed: %s", names[i], list, why);
            *bad = names[i];
            return ZEN_EINVAL;
        }
        return ZEN_OK;
    }
    ZEN_ERROR("init", "a Slurm step without SLURM_STEP_NODELIST or SLURM_JOB_NODELIST: set "
                      "MASTER_ADDR to the host of task 0");
    *bad = "SLURM_STEP_NODELIST";
    return ZEN_EINVAL;
}

zen_status zen__env_slurm_master_port(int *port, const char **bad)
{
    long job = 0, step = 0;
    const char *name = NULL;
    if (read_count("SLURM_JOB_ID", &job) != 0 && read_count("SLURM_JOBID", &job) != 0)
        name = "SLURM_JOB_ID";
    else if (read_count("SLURM_STEP_ID", &step) != 0 && read_count("SLURM_STEPID", &step) != 0)
        name = "SLURM_STEP_ID";
    if (name) {
        ZEN_ERROR("init", "a Slurm step with %s missing or malformed: set MASTER_PORT", name);
        *bad = name;
        return ZEN_EINVAL;
    }
    *port = zen__slurm_port(job, step);
    return ZEN_OK;
}
