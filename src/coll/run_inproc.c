/* zen_run_inproc: start N rank threads over one in-process world. */
#include <pthread.h>
#include <string.h>

#include <zen/comm.h>

#include "common/alloc.h"
#include "common/log.h"
#include "transport/transport.h"

zen_status zen_inproc_world_create(int nranks, zen_inproc_world **out)
{
    return zen__transport_inproc_world_create(nranks, out);
}

void zen_inproc_world_destroy(zen_inproc_world *world)
{
    zen__transport_inproc_world_destroy(world);
}

struct rank_thread {
    pthread_t thread;
    int rank;
    int nranks;
    zen_comm_options opts;
    zen_rank_fn fn;
    void *arg;
    zen_status status;
};

static void *rank_main(void *p)
{
    struct rank_thread *rt = p;
    zen__log_set_thread_rank(rt->rank);
    zen_comm *comm = NULL;
    rt->status = zen_comm_create(&rt->opts, &comm);
    if (rt->status != ZEN_OK)
        return NULL;
    rt->status = rt->fn(comm, rt->arg);
    if (rt->status != ZEN_OK) {
        /* A failure of the function's own (a file, the data) leaves no communicator error: say
         * so rather than print an empty detail. */
        const char *detail = zen_comm_last_error(comm);
        if (detail && *detail)
            ZEN_WARN("init", "rank %d's function returned %s: %s; aborting the other ranks",
                     rt->rank, zen_status_name(rt->status), detail);
        else
            ZEN_WARN("init",
                     "rank %d's function returned %s (%s) with no communicator error (a "
                     "failure of its own, which its caller reports); aborting the other ranks",
                     rt->rank, zen_status_name(rt->status), zen_strerror(rt->status));
        zen_comm_abort(comm); /* no other rank may wait for this one forever */
    }
    zen_comm_destroy(comm);
    return NULL;
}

zen_status zen_run_inproc(int nranks, const zen_comm_options *base, zen_rank_fn fn, void *arg,
                          zen_status *rank_status)
{
    if (nranks < 1 || !fn)
        return ZEN_EINVAL;
    zen_inproc_world *world = NULL;
    zen_status st = zen_inproc_world_create(nranks, &world);
    if (st != ZEN_OK)
        return st;
    struct rank_thread *threads = zen__calloc((size_t)nranks, sizeof *threads);
    if (!threads) {
        zen_inproc_world_destroy(world);
        return ZEN_ENOMEM;
    }
    int started = 0;
    for (int r = 0; r < nranks; r++) {
        struct rank_thread *rt = &threads[r];
        zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
        if (base)
            o = *base;
        o.transport = ZEN_TRANSPORT_INPROC;
        o.rank = r;
        o.world_size = nranks;
        o.inproc_world = world;
        rt->opts = o;
        rt->rank = r;
        rt->nranks = nranks;
        rt->fn = fn;
        rt->arg = arg;
        rt->status = ZEN_EINTERNAL;
        int err = pthread_create(&rt->thread, NULL, rank_main, rt);
        if (err != 0) {
            st = ZEN_ESYS;
            ZEN_ERROR("init", "cannot start the thread of rank %d of %d: %s", r, nranks,
                      strerror(err));
            break;
        }
        started++;
    }
    /* The ranks that started would wait the whole timeout for the others: abort the missing
     * ranks' endpoints in their stead, so every started rank fails at once naming them. */
    for (int r = started; r < nranks; r++) {
        zen_transport *t = NULL;
        if (zen__transport_inproc_create(world, r, &t) == ZEN_OK)
            t->ops->abort(t, ZEN_ESYS, "its thread could not be started");
    }
    for (int r = 0; r < started; r++)
        pthread_join(threads[r].thread, NULL);
    /* A thread that could not start leaves the others to time out; report it as the cause. */
    zen_status result = st;
    for (int r = 0; r < nranks; r++) {
        zen_status rs = r < started ? threads[r].status : st;
        if (rank_status)
            rank_status[r] = rs;
        if (result == ZEN_OK && rs != ZEN_OK)
            result = rs;
    }
    zen__free(threads);
    zen_inproc_world_destroy(world);
    return result;
}
