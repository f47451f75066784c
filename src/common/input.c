#include "common/input.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

FILE *zen__open_input(const char *path, uint64_t max_bytes, uint64_t *size, char *why, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, n, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    int err = EINVAL;
    if (fstat(fileno(f), &sb) != 0) {
        err = errno;
        snprintf(why, n, "cannot stat %s: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        snprintf(why, n, "%s is not a regular file", path);
    } else if ((uint64_t)sb.st_size > max_bytes) {
        err = EFBIG;
        snprintf(why, n,
                 "%s has %llu bytes, more than the %llu this process may read (half the "
                 "available memory)",
                 path, (unsigned long long)sb.st_size, (unsigned long long)max_bytes);
    } else {
        *size = (uint64_t)sb.st_size;
        return f;
    }
    fclose(f);
    errno = err;
    return NULL;
}
