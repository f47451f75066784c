/* Placeholder until the mpi transport lands. */
#include "transport/transport.h"

zen_status zen_transport_mpi_create(zen_transport **out)
{
    *out = NULL;
    return ZEN_EUNSUPPORTED;
}

int zen_transport_mpi_launched(void)
{
    return 0;
}
