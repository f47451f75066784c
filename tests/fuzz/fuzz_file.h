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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_require.h"

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

/* The file part of an input: a malloc'd copy of data[1..size) (*len bytes); data[0] is the
 * target's control byte. NULL for an empty input or when out of memory. */
static inline uint8_t *fuzz_body(const uint8_t *data, size_t size, size_t *len)
{
    if (size < 1)
        return NULL;
    *len = size - 1;
    uint8_t *file = malloc(*len ? *len : 1);
    if (file)
        memcpy(file, data + 1, *len);
    return file;
}

#endif
