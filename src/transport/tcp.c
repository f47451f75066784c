/* Placeholder until the tcp transport lands. */
#include "transport/transport.h"

zen_status zen_transport_tcp_create(int rank, int size, const char *master_addr, int master_port,
                                    double timeout_s, zen_transport **out)
{
    (void)rank;
    (void)size;
    (void)master_addr;
    (void)master_port;
    (void)timeout_s;
    *out = NULL;
    return ZEN_EUNSUPPORTED;
}
