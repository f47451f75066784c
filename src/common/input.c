#include "common/input.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zen/zen.h>

uint64_t zen__mem_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[128];
        unsigned long long kib;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
                fclose(f);
                return (uint64_t)kib * 1024;
            }
        fclose(f);
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        return (uint64_t)pages * (uint64_t)page;
    return UINT64_MAX;
}

static const char *kind_of(mode_t mode)
{
    if (S_ISFIFO(mode))
        return " but a named pipe (FIFO)";
    if (S_ISDIR(mode))
        return " but a directory";
    if (S_ISCHR(mode))
        return " but a character device";
    if (S_ISBLK(mode))
        return " but a block device";
    if (S_ISSOCK(mode))
        return " but a socket";
    return "";
}

/* Clears O_NONBLOCK on fd and wraps it in a FILE; closes fd on failure. */
static FILE *blocking_stream(int fd, const char *mode)
{
    int fl = fcntl(fd, F_GETFL);
    FILE *f = NULL;
    if (fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0)
        f = fdopen(fd, mode);
    if (!f) {
        int err = errno;
        close(fd);
        errno = err;
    }
    return f;
}

/*
 * open(2) of a FIFO for reading waits for a writer, forever if none comes; a stat() before the
 * open would race with a rename of the path. So the open is non-blocking (it returns at once
 * whatever the path names, following symlinks), fstat tells what the descriptor holds, and
 * only a regular file is read, after clearing O_NONBLOCK again.
 */
FILE *zen__open_input(const char *path, uint64_t max_bytes, uint64_t *size, char *why, size_t n)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, n, "cannot open %s: %s", path, strerror(err));
        errno = err;
        return NULL;
    }
    struct stat sb;
    int err = EINVAL;
    if (fstat(fd, &sb) != 0) {
        err = errno;
        snprintf(why, n, "cannot stat %s: %s", path, strerror(err));
    } else if (!S_ISREG(sb.st_mode)) {
        snprintf(why, n, "%s is not a regular file%s", path, kind_of(sb.st_mode));
    } else if ((uint64_t)sb.st_size > max_bytes) {
        err = EFBIG;
        snprintf(why, n, "%s has %llu bytes, more than the %llu this process may read", path,
                 (unsigned long long)sb.st_size, (unsigned long long)max_bytes);
    } else {
        FILE *f = blocking_stream(fd, "rb");
        if (!f) {
            err = errno;
            snprintf(why, n, "cannot read %s: %s", path, strerror(err));
            errno = err;
            return NULL;
        }
        if (size)
            *size = (uint64_t)sb.st_size;
        return f;
    }
    close(fd);
    errno = err;
    return NULL;
}

/*
 * A FIFO opened for writing waits for a reader; non-blocking, the open fails at once with ENXIO
 * when there is none, and succeeds when one is there (`--metrics /dev/stdout` piped to a
 * program, or a named pipe someone reads): those are legitimate outputs, so only the blocking
 * wait is refused.
 */
FILE *zen__open_output(const char *path, char *why, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        if (err == ENXIO)
            snprintf(why, n, "%s is a named pipe (FIFO) that no process is reading", path);
        else
            snprintf(why, n, "cannot create %s: %s", path, strerror(err));
        errno = err;
        return NULL;
    }
    FILE *f = blocking_stream(fd, "w");
    if (!f) {
        int err = errno;
        snprintf(why, n, "cannot write %s: %s", path, strerror(err));
        errno = err;
    }
    return f;
}

/* The public wrappers' argument check; why, when given, receives the reason. */
static int bad_open_args(const char *path, FILE **out, char *why, size_t why_size)
{
    if (out && path)
        return 0;
    if (why && why_size)
        snprintf(why, why_size, "no file named");
    errno = EINVAL;
    return 1;
}

zen_status zen_file_open_input(const char *path, uint64_t max_bytes, FILE **out, uint64_t *size,
                               char *why, size_t why_size)
{
    char buf[512];
    if (bad_open_args(path, out, why, why_size))
        return ZEN_EINVAL;
    *out = zen__open_input(path, max_bytes, size, why ? why : buf, why ? why_size : sizeof buf);
    if (*out)
        return ZEN_OK;
    return errno == EINVAL || errno == EFBIG ? ZEN_EINVAL : ZEN_EIO;
}

zen_status zen_file_open_output(const char *path, FILE **out, char *why, size_t why_size)
{
    char buf[512];
    if (bad_open_args(path, out, why, why_size))
        return ZEN_EINVAL;
    *out = zen__open_output(path, why ? why : buf, why ? why_size : sizeof buf);
    if (*out)
        return ZEN_OK;
    return errno == ENXIO ? ZEN_EINVAL : ZEN_EIO;
}
