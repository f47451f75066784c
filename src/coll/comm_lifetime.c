/*
 * Communicator lifetime, the top of coll: create (transport choice, rendezvous, seed
 * agreement), split, finalize, abort, destroy, and the arrival gather. It calls the collectives
 * (seeds, split, barrier, allgather); the struct's getters and error recording, which the
 * collectives call, are in comm.c below them, so no two files call each other.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zen/store.h>

#include "bootstrap/env.h"
#include "bootstrap/services.h"
#include "coll/comm_internal.h"
#include "coll/transport_env.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/options.h"
#include "common/tunables.h"

#define ROOT_CONTEXT 1u

static zen_status comm_alloc(zen_comm **out, int size)
{
    zen_comm *c = zen__calloc(1, sizeof *c);
    if (!c)
        return ZEN_ENOMEM;
    c->world_ranks = zen__calloc((size_t)size, sizeof *c->world_ranks);
    if (!c->world_ranks) {
        zen__free(c);
        return ZEN_ENOMEM;
    }
    c->size = size;
    /* read once per communicator: every call of it checks, or none does (agree.c) */
    c->check_args = zen__param_long("COLL_AGREE") != 0;
    c->slot_max_param = zen__param_long("SHM_SLOT_MAX_BYTES");
    c->algo_forced = zen__allreduce_algo_parse(zen__param_str("ALLREDUCE_ALGO"));
    *out = c;
    return ZEN_OK;
}

static uint64_t fresh_seed(void)
{
    uint64_t s = (uint64_t)zen_wall_ns() ^ ((uint64_t)getpid() << 32);
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        uint64_t r = 0;
        if (fread(&r, sizeof r, 1, f) == 1)
            s ^= r;
        fclose(f);
    }
    return zen_mix64(s);
}

/*
 * Rank 0 draws the hash seeds and sends them to every rank (a flat fan-out: it runs once, and
 * doubles as the first message exchange, so a broken world fails here with a clear error).
 * ZEN_SEED fixes them for reproducible runs.
 */
static zen_status agree_seeds(zen_comm *c)
{
    zen_coll cc;
    zen_status st = zen__coll_begin(c, "create", &cc);
    if (st != ZEN_OK)
        return st;
    /* the seeds, then rank 0's ZEN_SHM_SLOT_MAX_BYTES: whether a call goes through the
     * collective slots must be the same on every rank (a rank without them would send messages
     * to ranks waiting on its slot until the timeout), so one rank's setting is the job's */
    uint64_t msg[5];
    if (c->rank == 0) {
        uint64_t base = 0;
        if (!zen__param_u64("SEED", &base)) /* unset, or malformed (warned): a random seed */
            base = fresh_seed();
        for (int i = 0; i < 4; i++)
            c->seeds[i] = msg[i] = zen_hash64((uint64_t)i, base);
        msg[4] = (uint64_t)(c->slot_max_param > 0 ? c->slot_max_param : 0);
        for (int p = 1; p < c->size && st == ZEN_OK; p++)
            st = zen__coll_sendrecv(c, &cc, p, msg, sizeof msg, -1, NULL, 0);
    } else {
        st = zen__coll_sendrecv(c, &cc, -1, NULL, 0, 0, msg, sizeof msg);
        if (st == ZEN_OK) {
            memcpy(c->seeds, msg, sizeof c->seeds);
            c->slot_max_param = msg[4] > (uint64_t)LONG_MAX ? 0 : (long)msg[4];
        }
    }
    return zen__coll_end(c, &cc, st);
}

/* AUTO: threads when a world is given, else the transport the process was launched for
 * (mpirun: mpi), else ZEN_TRANSPORT. */
static zen_status pick_transport(const zen_comm_options *o, zen_transport_kind *kind)
{
    *kind = o->transport;
    if (*kind != ZEN_TRANSPORT_AUTO)
        return ZEN_OK;
    for (size_t i = 0; i < zen__transport_count(); i++) {
        const zen_transport_desc *d = zen__transport_at(i);
        if (d->open && (o->inproc_world ? d->traits.reach == ZEN_REACH_THREADS
                                        : d->launched && d->launched())) {
            *kind = d->kind;
            return ZEN_OK;
        }
    }
    *kind = zen__coll_transport_from_env();
    return ZEN_OK;
}

/* The row of *kindp brings the transport up; *kindp may be refined (shm+tcp on one host: shm). */
static zen_status make_transport(const zen_comm_options *o, const zen_env_info *env,
                                 zen_transport_kind *kindp, double timeout_s,
                                 const zen_store *store, zen_transport **t)
{
    const zen_transport_desc *d = zen__transport_desc(*kindp);
    if (!d)
        return ZEN_EINVAL;
    zen_transport_open_args a = {
        .rank = o->rank >= 0 ? o->rank : env->rank,
        .size = o->world_size > 0 ? o->world_size : env->world_size,
        .world = o->inproc_world,
        .master_addr = o->master_addr ? o->master_addr : env->master_addr,
        .master_port = o->master_port > 0 ? o->master_port : env->master_port,
        .store = store,
        .timeout_s = timeout_s,
        .boot = &zen__bootstrap_services,
    };
    return d->open(&a, t, kindp);
}

/* store: the rendezvous of zen_comm_create_with_store, NULL for the master-port one. */
static zen_status comm_create(const zen_comm_options *opts, const zen_store *store, zen_comm **out)
{
    if (!out)
        return ZEN_EINVAL;
    *out = NULL;
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    if (opts)
        o = *opts;
    if (!ZEN_OPTIONS_SIZE_OK(&o)) {
        ZEN_ERROR("init",
                  "zen_comm_options.size %zu is not this zen's (%zu): rebuild against its "
                  "headers and initialise with zen_comm_options_init",
                  o.size, sizeof o);
        return ZEN_EINVAL;
    }
    zen_env_info env;
    const char *bad = NULL;
    zen_status st = zen__env_read(&env, &bad);
    if (st != ZEN_OK) {
        ZEN_ERROR("init", "malformed environment variable %s", bad ? bad : "?");
        return st;
    }
    double timeout_s = o.timeout_s > 0 ? o.timeout_s : zen__param_timeout("TIMEOUT_S");
    if (!(timeout_s > 0))
        timeout_s = 300;
    zen_transport_kind kind;
    if ((st = pick_transport(&o, &kind)) != ZEN_OK)
        return st;
    zen_transport *t = NULL;
    st = make_transport(&o, &env, &kind, timeout_s, store, &t);
    if (st == ZEN_OK)
        st = zen__transport_wrap(&t); /* tests: ZEN_FAULT injects failures (faulty.h) */
    if (st != ZEN_OK) {
        ZEN_ERROR("init", "cannot create the %s transport: %s", zen_transport_name(kind),
                  zen_strerror(st));
        return st;
    }
    if (zen__transport_traits(kind)->reach != ZEN_REACH_THREADS && !t->host_of &&
        env.local_rank >= 0 && env.local_size > 0) {
        t->local_rank = env.local_rank;
        t->local_size = env.local_size;
    }
    zen_comm *c = NULL;
    if ((st = comm_alloc(&c, t->size)) != ZEN_OK) {
        t->ops->destroy(t);
        return st;
    }
    c->transport = t;
    c->owns_transport = 1;
    c->world = o.inproc_world;
    c->kind = kind;
    c->rank = t->rank;
    c->ctx = ROOT_CONTEXT;
    c->timeout_s = timeout_s;
    for (int r = 0; r < c->size; r++)
        c->world_ranks[r] = r;
    zen__log_set_thread_rank(c->rank);
    if ((st = agree_seeds(c)) != ZEN_OK) {
        ZEN_ERROR("init", "communicator creation failed: %s", c->last_error);
        zen_comm_abort(c);
        zen_comm_destroy(c);
        return st;
    }
    ZEN_INFO("init", "rank %d of %d up on %s", c->rank, c->size, zen_transport_name(kind));
    *out = c;
    return ZEN_OK;
}

zen_status zen_comm_create(const zen_comm_options *opts, zen_comm **out)
{
    return comm_create(opts, NULL, out);
}

zen_status zen_comm_create_with_store(const zen_comm_options *opts, const zen_store *store,
                                      zen_comm **out)
{
    if (out)
        *out = NULL;
    if (!opts || !store || !store->set || !store->get || opts->rank < 0 || opts->world_size < 1 ||
        opts->rank >= opts->world_size) {
        ZEN_ERROR("init", "zen_comm_create_with_store needs a store with set and get, and "
                          "opts.rank in [0, opts.world_size)");
        return ZEN_EINVAL;
    }
    zen_comm_options o = *opts;
    if (o.transport == ZEN_TRANSPORT_AUTO) /* never mpi: a store means the caller's rendezvous */
        o.transport = zen__coll_transport_from_env();
    if (!zen__transport_traits(o.transport)->store_rendezvous) {
        ZEN_ERROR("init", "the %s transport has no store rendezvous (use auto, tcp or shm)",
                  zen_transport_name(o.transport));
        return ZEN_EUNSUPPORTED;
    }
    return comm_create(&o, store, out);
}

/* Exchange (color, key) with every rank: a flat all-to-all of 8 bytes, splits are rare. */
static zen_status exchange_color_key(zen_comm *c, int color, int key, int *all)
{
    zen_coll cc;
    zen_status st = zen__coll_begin(c, "split", &cc);
    if (st != ZEN_OK)
        return st;
    int mine[2] = { color, key };
    all[2 * c->rank] = color;
    all[2 * c->rank + 1] = key;
    for (int d = 1; d < c->size && st == ZEN_OK; d++) {
        int dst = (c->rank + d) % c->size;
        int src = (c->rank - d + c->size) % c->size;
        st = zen__coll_sendrecv(c, &cc, dst, mine, sizeof mine, src, &all[2 * src], sizeof mine);
    }
    return zen__coll_end(c, &cc, st);
}

zen_status zen_comm_split(zen_comm *comm, int color, int key, zen_comm **out)
{
    if (!comm || !out)
        return ZEN_EINVAL;
    *out = NULL;
    if (color < ZEN_SPLIT_NONE)
        return zen__fail(comm, ZEN_EINVAL, "split color %d (use >= 0, or ZEN_SPLIT_NONE)", color);
    int *all = zen__malloc_array((size_t)comm->size * 2, sizeof *all);
    if (!all)
        return ZEN_ENOMEM;
    zen_status st = exchange_color_key(comm, color, key, all);
    uint32_t split_index = comm->split_seq++;
    if (st != ZEN_OK || color < 0) {
        zen__free(all);
        return st;
    }
    int n = 0;
    for (int r = 0; r < comm->size; r++)
        n += all[2 * r] == color;
    zen_comm *c = NULL;
    if ((st = comm_alloc(&c, n)) != ZEN_OK) {
        zen__free(all);
        return st;
    }
    /* Members in (key, parent rank) order: insertion sort, n is small. */
    int m = 0;
    for (int r = 0; r < comm->size; r++) {
        if (all[2 * r] != color)
            continue;
        int j = m++;
        while (j > 0 && all[2 * c->world_ranks[j - 1] + 1] > all[2 * r + 1]) {
            c->world_ranks[j] = c->world_ranks[j - 1];
            j--;
        }
        c->world_ranks[j] = r; /* parent ranks for now */
    }
    for (int i = 0; i < n; i++) {
        if (c->world_ranks[i] == comm->rank)
            c->rank = i;
        c->world_ranks[i] = comm->world_ranks[c->world_ranks[i]];
    }
    zen__free(all);
    c->transport = comm->transport;
    c->world = comm->world;
    c->kind = comm->kind;
    c->timeout_s = comm->timeout_s;
    memcpy(c->seeds, comm->seeds, sizeof c->seeds);
    uint64_t h = zen_hash64(((uint64_t)comm->ctx << 32) | split_index, (uint64_t)color + 1);
    c->ctx = (uint32_t)(h | 2u); /* never ROOT_CONTEXT or 0 */
    *out = c;
    return ZEN_OK;
}

zen_status zen_comm_finalize(zen_comm *comm)
{
    if (!comm)
        return ZEN_EINVAL;
    return zen_barrier(comm);
}

void zen_comm_destroy(zen_comm *comm)
{
    if (!comm)
        return;
    /* attribute slots may hold sub-communicators: release them before the transport */
    for (int k = ZEN_ATTR_COUNT - 1; k >= 0; k--)
        zen__comm_attr_set(comm, (zen_comm_attr_key)k, NULL, NULL);
    if (comm->owns_transport && comm->transport)
        comm->transport->ops->destroy(comm->transport);
    zen__free(comm->world_ranks);
    zen__free(comm->coll_scratch);
    zen__free(comm->spare_request);
    zen__free(comm);
}

void zen_comm_abort(zen_comm *comm)
{
    if (!comm || !comm->transport)
        return;
    char reason[700];
    snprintf(reason, sizeof reason, "%s",
             comm->last_error[0] ? comm->last_error : "aborted by the application");
    comm->transport->ops->abort(comm->transport, ZEN_EABORTED, reason);
}

zen_status zen_comm_gather_arrivals(zen_comm *comm, int64_t *arrive_ns, uint64_t *seq,
                                    const char **op_name)
{
    if (!comm || !arrive_ns)
        return ZEN_EINVAL;
    if (comm->arrival_count == 0)
        return zen__fail(comm, ZEN_EINVAL, "gather_arrivals before any collective");
    /* Every rank has completed the same collectives, so the newest is the same everywhere. */
    zen_arrival last = comm->arrivals[(comm->arrival_count - 1) % ZEN_ARRIVAL_HISTORY];
    int64_t mine = last.arrive_ns;
    zen_status st = zen_allgather(comm, &mine, arrive_ns, 1, ZEN_I64);
    if (seq)
        *seq = last.seq;
    if (op_name)
        *op_name = last.op;
    return st;
}
