/*
 * The file readers take a path, not a buffer: the trace and checkpoint targets hand them each
 * input through one anonymous in-memory file (memfd), named by /proc/self/fd/N, rewritten per
 * input. A regular file, so the readers' type and size checks pass as for a file on disk.
 * Needs _GNU_SOURCE (memfd_create) defined before the first include.
 */
#ifndef ZEN_TESTS_FUZZ_FILE_H
#define ZEN_TESTS_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* Write data to the target's memfd; returns its path (NULL only if no memfd can be made). */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("zen-fuzz", 0);
        if (fd < 0)
            return NULL;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        return NULL;
    return path;
}

#define REQUIRE(cond)         \
    do {                      \
        if (!(cond))          \
            __builtin_trap(); \
    } while (0)

#endif
