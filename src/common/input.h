/*
 * Files named by users (traces, corpora, checkpoints, secret files, metrics). Inputs are read
 * whole into memory, so a device (/dev/zero) or a corrupt size field would otherwise read or
 * allocate until the machine runs out of memory; and opening a FIFO waits for its other end,
 * forever when there is none. Every such file is opened here; the public forms are
 * zen_file_open_input / zen_file_open_output (include/zen/zen.h), for src/train and tools.
 */
#ifndef ZEN_COMMON_INPUT_H
#define ZEN_COMMON_INPUT_H

#include <stdint.h>
#include <stdio.h>

/* Bytes of memory the kernel says are available now (MemAvailable), else free physical memory,
 * else UINT64_MAX when neither can be read. */
uint64_t zen__mem_available_bytes(void);

/* Opens path for reading when it is a regular file of at most max_bytes (UINT64_MAX: no limit),
 * storing its size in *size (may be NULL). Never blocks on what path names. On failure returns
 * NULL with a sentence in why (errno-style reason, "is not a regular file but a named pipe (FIFO)",
 * or the size against the limit) and errno set (open's, EINVAL for not a regular file, EFBIG for
 * too large). */
FILE *zen__open_input(const char *path, uint64_t max_bytes, uint64_t *size, char *why, size_t n);

/* Creates or truncates path for writing (mode 0666 less the umask). A FIFO without a reader is
 * refused at once (errno ENXIO) instead of waited for. On failure returns NULL with a sentence in
 * why and errno set. */
FILE *zen__open_output(const char *path, char *why, size_t n);

#endif
