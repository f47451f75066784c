/* zen_free_port: see free_port.h. */
#include "free_port.h"

#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* 1 when a TCP listener could bind port on all addresses right now. */
static int port_is_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    sa.sin_port = htons((uint16_t)port);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/*
 * A free port for the rendezvous, chosen outside the kernel's ephemeral range
 * (net.ipv4.ip_local_port_range): a port from inside it could be handed to some outgoing
 * connection between this check and rank 0's bind, or even make a rank that connects before
 * rank 0 listens connect to itself.
 */
int zen_free_port(void)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2) {
            lo = 32768;
            hi = 60999;
        }
        fclose(f);
    }
    int first = 10000, last = lo - 1; /* below the range, else above it */
    if (last - first < 1000) {
        first = hi + 1;
        last = 65535;
    }
    static unsigned calls;
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL) ^ (++calls * 7919u);
    for (int attempt = 0; attempt < 200 && last > first; attempt++) {
        seed = seed * 1103515245u + 12345u;
        int port = first + (int)((seed >> 8) % (unsigned)(last - first + 1));
        if (port_is_free(port))
            return port;
    }
    return -1;
}
