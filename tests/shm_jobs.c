#include "shm_jobs.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tools/free_port.h"

void zt_set_host_id(int rank, void *ctx)
{
    int per = *(const int *)ctx;
    if (per <= 0)
        return;
    char id[64];
    snprintf(id, sizeof id, "zt-host-%d", rank / per);
    setenv("ZEN_HOST_ID", id, 1);
}

void zt_job_run(const zt_job *job, zen_rank_fn fn, void *arg, int *status)
{
    int port = zen_free_port();
    pid_t pids[64];
    fflush(NULL);
    for (int r = 0; r < job->n && r < 64; r++) {
        pids[r] = fork();
        if (pids[r] != 0)
            continue;
        int per = job->ranks_per_host;
        zt_set_host_id(r, &per);
        if (job->env)
            putenv((char *)job->env);
        zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
        o.transport = job->kind;
        o.rank = r;
        o.world_size = job->n;
        o.master_addr = "127.0.0.1";
        o.master_port = port;
        o.timeout_s = job->timeout_s > 0 ? job->timeout_s : 30;
        zen_comm *c = NULL;
        zen_status st = zen_comm_create(&o, &c);
        if (st == ZEN_OK) {
            st = fn(c, arg);
            if (st != ZEN_OK) {
                fprintf(stderr, "rank %d of %d: %s: %s\n", r, job->n, zen_status_name(st),
                        zen_comm_last_error(c));
                zen_comm_abort(c);
            }
            zen_comm_destroy(c);
        } else {
            fprintf(stderr, "rank %d of %d: zen_comm_create: %s\n", r, job->n, zen_status_name(st));
        }
        fflush(NULL);
        _exit(st == ZEN_OK ? 0 : 1);
    }
    time_t give_up = time(NULL) + 120;
    for (int r = 0; r < job->n; r++) {
        status[r] = -1;
        if (pids[r] < 0)
            continue;
        while (waitpid(pids[r], &status[r], WNOHANG) != pids[r]) {
            if (time(NULL) > give_up) {
                fprintf(stderr, "rank %d hangs; killing it\n", r);
                kill(pids[r], SIGKILL);
            }
            struct timespec ms2 = { 0, 2 * 1000 * 1000 };
            nanosleep(&ms2, NULL);
        }
    }
}

int zt_job_all_ok(const zt_job *job, const int *status)
{
    int ok = 1;
    for (int r = 0; r < job->n; r++) {
        if (WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)
            continue;
        fprintf(stderr, "rank %d of %d: wait status 0x%x\n", r, job->n, status[r]);
        ok = 0;
    }
    return ok;
}
