#include "testutil.h"

#include <stdio.h>

void zt_report(zen_comm *comm, const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: rank %d: check failed: %s (last error: %s)\n", file, line,
            zen_comm_rank(comm), what, zen_comm_last_error(comm));
}

void zt_run_inproc(int nranks, zen_rank_fn fn, void *arg)
{
    zen_status status[4096];
    zen_status st = zen_run_inproc(nranks, NULL, fn, arg, status);
    if (st != ZEN_OK) {
        for (int r = 0; r < nranks && r < 4096; r++)
            if (status[r] != ZEN_OK)
                fprintf(stderr, "rank %d of %d: %s\n", r, nranks, zen_status_name(status[r]));
    }
    assert_int_equal(st, ZEN_OK);
}

uint64_t zt_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
