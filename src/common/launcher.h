/*
 * Whether an MPI launcher started this process: mpirun's OMPI_COMM_WORLD_SIZE, or PMI_SIZE
 * outside a Slurm step. srun --mpi=pmi2 sets PMI_SIZE too, but an MPI library built without
 * Slurm's PMI2 cannot start there (Debian's Open MPI aborts in MPI_Init), so inside a step zen
 * keeps its own transports unless ZEN_TRANSPORT=mpi asks. One rule for the environment reader
 * (bootstrap/env.c) and the mpi transport's row (transport/mpi.c).
 */
#ifndef ZEN_COMMON_LAUNCHER_H
#define ZEN_COMMON_LAUNCHER_H

#include <stdlib.h>

static inline int zen__env_mpi_launcher(void)
{
    const char *step = getenv("SLURM_STEP_NUM_TASKS");
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL ||
           (getenv("PMI_SIZE") != NULL && !(step && *step));
}

#endif
