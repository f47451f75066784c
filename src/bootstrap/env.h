/*
 * Rendezvous facts from the environment, in the conventions launchers use: zen's own ZEN_*,
 * torchrun's RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT, Open MPI's
 * OMPI_COMM_WORLD_*, PMI's PMI_RANK/PMI_SIZE, PMIx's PMIX_RANK and a Slurm step's SLURM_*
 * (env_slurm.h). For each fact the first one set wins, in that order.
 */
#ifndef ZEN_BOOTSTRAP_ENV_H
#define ZEN_BOOTSTRAP_ENV_H

#include <zen/zen.h>

typedef struct zen_env_info {
    int rank;       /* -1 when not set */
    int world_size; /* -1 when not set */
    int local_rank; /* -1 when not set */
    int local_size; /* -1 when not set */
    char master_addr[256];
    int master_port;
    int launched_by_mpi;   /* OMPI_COMM_WORLD_SIZE, or PMI_SIZE outside a Slurm step, set */
    int slurm_step;        /* a task of a Slurm step (srun) */
    const char *rank_from; /* the variable the rank came from (static string), NULL: none */
} zen_env_info;

/* Read the environment. ZEN_EINVAL (with *bad naming the variable) when a value is malformed. */
zen_status zen__env_read(zen_env_info *info, const char **bad);

#endif
