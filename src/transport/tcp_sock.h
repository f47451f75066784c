/*
 * Socket helpers shared by the tcp transport and its rendezvous: little-endian wire encoding,
 * socket tuning, and reads/writes of whole buffers on non-blocking sockets with deadlines
 * (every byte that crosses a socket in zen goes through a poll with a timeout, so nothing can
 * block forever on a peer that stopped).
 */
#ifndef ZEN_TRANSPORT_TCP_SOCK_H
#define ZEN_TRANSPORT_TCP_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Wire integers are little-endian whatever the host order. */
static inline void zen_put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static inline void zen_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void zen_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint16_t zen_get_u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t zen_get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t zen_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Non-blocking, close-on-exec. 0 or -errno. */
int zen__sock_nonblock(int fd);

/* Data connection options: TCP_NODELAY (frames are written whole, Nagle only adds latency) and
 * large kernel buffers (ZEN_SOCKET_BUF_BYTES, when the kernel allows that much; else its
 * autotuning) so a big message streams without stalls. */
void zen__sock_tune(int fd);

/*
 * Write every byte of iov (iov is modified). Waits in poll while the socket is full; gives up
 * with -ETIMEDOUT when no byte could be written for stall_ns, or when the absolute deadline
 * deadline_ns (INT64_MAX: none) passes. 0 or -errno (-EPIPE: the peer closed).
 */
int zen__sock_writev_all(int fd, struct iovec *iov, int iovcnt, int64_t stall_ns,
                         int64_t deadline_ns);

/* Read exactly len bytes before deadline_ns. 0, -ETIMEDOUT, -EPIPE (end of stream) or -errno. */
int zen__sock_read_all(int fd, void *buf, size_t len, int64_t deadline_ns);

/* Connect a new non-blocking socket to addr:port (IPv4, network order) before deadline_ns.
 * Returns the fd, or -errno (-ECONNREFUSED when nobody listens yet). */
int zen__sock_connect(uint32_t addr_be, uint16_t port, int64_t deadline_ns);

/* Listen on addr:port (port 0: ephemeral, reuse: SO_REUSEADDR). Returns the fd or -errno;
 * *bound_port gets the port. */
int zen__sock_listen(uint32_t addr_be, uint16_t port, int reuse, uint16_t *bound_port);

/* Accept one connection before deadline_ns: the new non-blocking fd, or -errno. */
int zen__sock_accept(int listen_fd, int64_t deadline_ns);

/* Resolve a host name or dotted address to an IPv4 address (network order). 0 or -1. */
int zen__sock_resolve(const char *host, uint32_t *addr_be);

/* Dotted form of an IPv4 address (network order) into out (>= 16 bytes). */
const char *zen__sock_ntoa(uint32_t addr_be, char *out, size_t size);

#endif
