/*
 * libFuzzer target for gradient trace files (zen_trace_read, src/sparse/trace/trace.c; layout in
 * docs/trace-format.md), which `zen bench sparse --trace` and `zen simulate --trace` read from
 * any directory they are given. Also linked into fuzz_trace_replay (replay.c).
 *
 * Input: one control byte, then the file. Control bit 0 rewrites the FNV-1a trailer to match the
 * bytes before it, so that mutations get past the checksum into the parser.
 * Invariants (a violation traps): an accepted step has width >= 1, rows <= 2^32 - 1 and every
 * index below rows in each tensor, NUL-terminated names; a refused one owns nothing.
 */
#define _GNU_SOURCE /* memfd_create (fuzz_file.h) */
#include <stdlib.h>
#include <string.h>

#include <zen/sparse.h>

#include "common/hash.h"
#include "fuzz_file.h"

#define TRACE_CHECK_SEED 0x7a656e7472616365ull /* src/sparse/trace/trace.c */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len = 0;
    uint8_t *file = fuzz_body(data, size, &len);
    if (!file)
        return 0;
    if ((data[0] & 1) && len >= 8) {
        uint64_t sum = zen__fnv1a(file, len - 8, TRACE_CHECK_SEED);
        for (int i = 0; i < 8; i++)
            file[len - 8 + (size_t)i] = (uint8_t)(sum >> (8 * i));
    }
    const char *path = fuzz_file(file, len);
    free(file);
    if (!path)
        return 0;
    zen_trace_step s;
    zen_status st = zen_trace_read(path, &s);
    if (st != ZEN_OK) {
        REQUIRE(s.tensors == NULL && s.count == 0);
        return 0;
    }
    for (size_t t = 0; t < s.count; t++) {
        const zen_trace_tensor *x = &s.tensors[t];
        REQUIRE(x->width >= 1 && x->rows <= UINT32_MAX);
        REQUIRE(memchr(x->name, 0, sizeof x->name) != NULL);
        for (uint64_t i = 0; i < x->nnz; i++)
            REQUIRE(x->indices[i] < x->rows);
        volatile float last = x->nnz ? x->values[x->nnz * x->width - 1] : 0.0f; /* in bounds */
        (void)last;
    }
    zen_trace_free(&s);
    return 0;
}
