/*
 * Forked multi-process jobs for the shm tests: n children of this process (no exec, so rank
 * functions and their arguments stay valid), each creating a communicator of the given kind on
 * a free loopback port. With ranks_per_host > 0 every child first sets ZEN_HOST_ID to
 * "zt-host-<rank / ranks_per_host>" (emulated hosts: shm inside, tcp across).
 */
#ifndef ZEN_TESTS_SHM_JOBS_H
#define ZEN_TESTS_SHM_JOBS_H

#include <zen/comm.h>

typedef struct zt_job {
    zen_transport_kind kind;
    int n;
    int ranks_per_host; /* 0: all on this host */
    int timeout_s;      /* communicator timeout */
    const char *env;    /* "NAME=VALUE" set in every child, or NULL */
} zt_job;

/* Run fn on the job's ranks; status[r] gets each child's wait status (a child still running
 * after 120 s is killed). */
void zt_job_run(const zt_job *job, zen_rank_fn fn, void *arg, int *status);

/* 1 when every child exited 0, printing the others. */
int zt_job_all_ok(const zt_job *job, const int *status);

/* The ZEN_HOST_ID setter zt_job_run uses, as a zt_run_forked before() hook (ctx: int *
 * ranks_per_host). */
void zt_set_host_id(int rank, void *ctx);

#endif
