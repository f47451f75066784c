/*
 * A Slurm step's rendezvous facts (srun sets them; docs/multi-host.md, "Slurm"): the rank is
 * SLURM_PROCID, the world SLURM_STEP_NUM_TASKS, the local rank SLURM_LOCALID, the local size this
 * node's entry of SLURM_STEP_TASKS_PER_NODE (SLURM_NODEID), the master the first host of
 * SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST) where srun puts task 0, and the master port
 * zen__slurm_port(SLURM_JOB_ID, SLURM_STEP_ID).
 *
 * A step is recognised by SLURM_STEP_NUM_TASKS with SLURM_PROCID: an sbatch script itself (the
 * batch step) has SLURM_PROCID=0 and SLURM_NTASKS=N but no SLURM_STEP_NUM_TASKS, and a program
 * it runs without srun is one process, not rank 0 of N that would wait for N - 1 peers that
 * never come.
 */
#ifndef ZEN_BOOTSTRAP_ENV_SLURM_H
#define ZEN_BOOTSTRAP_ENV_SLURM_H

#include <stddef.h>

#include <zen/zen.h>

/* 1 when this process is a task of a Slurm step (started by srun). */
int zen__env_slurm_step(void);

/* Tasks of the step on this node into *out (-1 when Slurm does not say). ZEN_EINVAL with *bad
 * naming the variable when one is malformed (the reason is logged). */
zen_status zen__env_slurm_local_size(int *out, const char **bad);

/* The step's master host into addr (cap bytes). ZEN_EINVAL with *bad naming the variable when the
 * node list is missing or malformed (the reason is logged). */
zen_status zen__env_slurm_master_addr(char *addr, size_t cap, const char **bad);

/* The step's master port (zen__slurm_port) into *port. ZEN_EINVAL with *bad when SLURM_JOB_ID or
 * SLURM_STEP_ID is missing or malformed. */
zen_status zen__env_slurm_master_port(int *port, const char **bad);

#endif
