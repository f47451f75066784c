#include "transport/tcp_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/tunables.h"

int zen__sock_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -errno;
    return 0;
}

static long read_sysctl(const char *path)
{
    long v = -1;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static long rmem_max = -1, wmem_max = -1;
static pthread_once_t limits_once = PTHREAD_ONCE_INIT;

static void read_limits(void)
{
    rmem_max = read_sysctl("/proc/sys/net/core/rmem_max");
    wmem_max = read_sysctl("/proc/sys/net/core/wmem_max");
}

void zen__sock_tune(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    long want = zen__param_long("SOCKET_BUF_BYTES");
    if (want <= 0)
        return; /* 0: the kernel's autotuning */
    if (want > (1 << 30))
        want = 1 << 30;
    /*
     * Setting a buffer size turns the kernel's autotuning off, and the kernel silently caps the
     * size at net.core.{r,w}mem_max (often 208 KiB): a capped fixed buffer would be smaller than
     * what autotuning reaches (tcp_rmem's max, MiBs). So set each only when it is not capped.
     */
    pthread_once(&limits_once, read_limits);
    int bytes = (int)want;
    if (wmem_max >= want)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    if (rmem_max >= want)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

/* Poll one fd for events until deadline_ns; 1 ready, 0 timed out, -errno. */
static int wait_fd(int fd, short events, int64_t deadline_ns)
{
    for (;;) {
        int ms = zen_poll_ms(deadline_ns, 1000); /* 1 s slices: EINTR and clock jumps */
        if (ms == 0)
            return 0;
        struct pollfd p = { .fd = fd, .events = events, .revents = 0 };
        int rc = poll(&p, 1, ms);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -errno;
    }
}

int zen__sock_writev_all(int fd, struct iovec *iov, int iovcnt, int64_t stall_ns,
                         int64_t deadline_ns)
{
    int64_t last_progress = zen_now_ns();
    while (iovcnt > 0) {
        if (iov->iov_len == 0) {
            iov++;
            iovcnt--;
            continue;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)iovcnt;
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n > 0) {
            last_progress = zen_now_ns();
            size_t left = (size_t)n;
            while (left > 0 && iovcnt > 0) {
                size_t take = left < iov->iov_len ? left : iov->iov_len;
                iov->iov_base = (char *)iov->iov_base + take;
                iov->iov_len -= take;
                left -= take;
                if (iov->iov_len == 0) {
                    iov++;
                    iovcnt--;
                }
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int64_t until = stall_ns > 0 ? zen_ns_add_sat(last_progress, stall_ns) : INT64_MAX;
        if (deadline_ns < until)
            until = deadline_ns;
        int rc = wait_fd(fd, POLLOUT, until);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return -ETIMEDOUT;
    }
    return 0;
}

int zen__sock_read_all(int fd, void *buf, size_t len, int64_t deadline_ns)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return -EPIPE;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int rc = wait_fd(fd, POLLIN, deadline_ns);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return -ETIMEDOUT;
    }
    return 0;
}

int zen__sock_connect(uint32_t addr_be, uint16_t port, int64_t deadline_ns)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -errno;
    int rc = zen__sock_nonblock(fd);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = addr_be;
    sa.sin_port = htons(port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (errno != EINPROGRESS && errno != EINTR) {
            rc = -errno;
            close(fd);
            return rc;
        }
        rc = wait_fd(fd, POLLOUT, deadline_ns);
        if (rc <= 0) {
            close(fd);
            return rc == 0 ? -ETIMEDOUT : rc;
        }
        int err = 0;
        socklen_t elen = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
            err = errno;
        if (err) {
            close(fd);
            return -err;
        }
    }
    /* Connecting to a local port nobody listens on can, by TCP simultaneous open, connect the
     * socket to itself when the kernel picks that same port as the source: treat as refused. */
    struct sockaddr_in me;
    socklen_t mlen = sizeof me;
    if (getsockname(fd, (struct sockaddr *)&me, &mlen) == 0 && me.sin_port == sa.sin_port &&
        me.sin_addr.s_addr == sa.sin_addr.s_addr) {
        close(fd);
        return -ECONNREFUSED;
    }
    return fd;
}

int zen__sock_listen(uint32_t addr_be, uint16_t port, int reuse, uint16_t *bound_port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (reuse)
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = addr_be;
    sa.sin_port = htons(port);
    socklen_t slen = sizeof sa;
    int rc = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, SOMAXCONN) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &slen) < 0)
        rc = -errno;
    if (rc == 0)
        rc = zen__sock_nonblock(fd);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *bound_port = ntohs(sa.sin_port);
    return fd;
}

int zen__sock_accept(int listen_fd, int64_t deadline_ns)
{
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd >= 0) {
            int rc = zen__sock_nonblock(fd);
            if (rc < 0) {
                close(fd);
                return rc;
            }
            return fd;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int rc = wait_fd(listen_fd, POLLIN, deadline_ns);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return -ETIMEDOUT;
    }
}

int zen__sock_resolve(const char *host, uint32_t *addr_be)
{
    struct in_addr in;
    if (inet_pton(AF_INET, host, &in) == 1) {
        *addr_be = in.s_addr;
        return 0;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -1;
    *addr_be = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
    return 0;
}

const char *zen__sock_ntoa(uint32_t addr_be, char *out, size_t size)
{
    struct in_addr in = { .s_addr = addr_be };
    if (!inet_ntop(AF_INET, &in, out, (socklen_t)size))
        snprintf(out, size, "?");
    return out;
}
