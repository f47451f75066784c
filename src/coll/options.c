/* Initialisers of the public options structs of the communicator and the names of its public
 * enums (see include/zen/comm.h): leaves that the collectives and their checks (agree.c) call. */
#include <zen/comm.h>

void zen_comm_options_init(zen_comm_options *opts)
{
    if (opts)
        *opts = (zen_comm_options)ZEN_COMM_OPTIONS_INIT;
}

const char *zen_allreduce_algo_name(zen_allreduce_algo algo)
{
    switch (algo) {
    case ZEN_ALLREDUCE_AUTO:
        return "auto";
    case ZEN_ALLREDUCE_RING:
        return "ring";
    case ZEN_ALLREDUCE_RHD:
        return "rhd";
    case ZEN_ALLREDUCE_MPI:
        return "mpi";
    case ZEN_ALLREDUCE_SLOTS:
        return "slots";
    }
    return "?";
}
