/*
 * Limits on what an input file may make us allocate. Files named by users (traces, corpora) are
 * read whole into memory, so a device (/dev/zero), a FIFO or a corrupt size field would otherwise
 * read or allocate until the machine runs out of memory.
 */
#ifndef ZEN_COMMON_INPUT_H
#define ZEN_COMMON_INPUT_H

#include <stdint.h>
#include <stdio.h>

/* Bytes of memory the kernel says are available now (MemAvailable), else free physical memory,
 * else UINT64_MAX when neither can be read. */
uint64_t zen__mem_available_bytes(void);

/* Opens path for reading when it is a regular file of at most max_bytes (UINT64_MAX: no limit),
 * storing its size in *size. On failure returns NULL with a sentence in why (errno-style reason,
 * "is not a regular file", or the size against the limit) and errno set (fopen's, EINVAL for
 * not a regular file, EFBIG for too large). */
FILE *zen__open_input(const char *path, uint64_t max_bytes, uint64_t *size, char *why, size_t n);

#endif
