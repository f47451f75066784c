/*
 * Gradient traces: recorded sparse gradients, one file per rank and training step, written by
 * `zen train --dump-grads DIR` and replayed by `zen bench sparse --trace DIR`. The byte layout is
 * specified in docs/trace-format.md; this is its only reader and writer.
 */
#ifndef ZEN_SPARSE_TRACE_H
#define ZEN_SPARSE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#define ZEN_TRACE_NAME_MAX 255

/* One sparse tensor of a step: sorted or not, duplicates allowed (they are summed on use). */
typedef struct zen_trace_tensor {
    char name[ZEN_TRACE_NAME_MAX + 1];
    uint64_t rows;
    uint32_t width;
    uint64_t nnz;
    uint32_t *indices; /* nnz */
    float *values;     /* nnz * width */
} zen_trace_tensor;

typedef struct zen_trace_step {
    uint32_t rank;
    uint32_t world_size;
    uint64_t step;
    size_t count;
    zen_trace_tensor *tensors;
} zen_trace_step;

/* DIR/rank<R>-step<S>.zgrad (S zero-padded to 6 digits); ZEN_EINVAL if it does not fit. */
zen_status zen_trace_path(char *out, size_t size, const char *dir, uint32_t rank, uint64_t step);

/* Write a step to path (atomically: a temporary file renamed into place). ZEN_EIO on failure,
 * ZEN_EINVAL for a malformed step (index >= rows, name too long). */
zen_status zen_trace_write(const char *path, const zen_trace_step *step);

/* Read a step; ZEN_EIO if it cannot be read, ZEN_ECORRUPT if the magic, version, sizes, an index
 * or the checksum is wrong. On success free it with zen_trace_free. */
zen_status zen_trace_read(const char *path, zen_trace_step *out);

void zen_trace_free(zen_trace_step *step);

#endif
