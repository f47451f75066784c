/* Initialisers of the public options structs of the communicator (see include/zen/comm.h). */
#include <zen/comm.h>

void zen_comm_options_init(zen_comm_options *opts)
{
    if (opts)
        *opts = (zen_comm_options)ZEN_COMM_OPTIONS_INIT;
}
