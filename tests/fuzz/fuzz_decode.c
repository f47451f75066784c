/*
 * libFuzzer target for the pull-phase decoders of BALANCED (hash bitmap, COO and GAP blobs,
 * src/sparse/wire/bitmap.c). Also linked into fuzz_decode_replay (replay.c), which replays the seed
 * corpus in ordinary (gcc, ASan) builds.
 *
 * Input: 4 parameter bytes, then the blob.
 *   byte 0, 1  rows = 1 + (b0 | b1 << 8) % 3000
 *   byte 2     n owners = 1 + b2 % 9; owner j = (b2 / 9) % n
 *   byte 3     width = 1 + b3 % 4
 * Invariants checked (a violation traps): a blob is accepted by all three entry points or by
 * none; an accepted blob decodes to count strictly increasing rows, each < rows and owned by j;
 * the dense decoder writes only those rows; a rejected blob leaves the dense output untouched.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_require.h"
#include "sparse/wire/bitmap.h"
#include "sparse/wire/coo.h"
#include "sparse/wire/hier_hash.h"
#include "sparse/wire/universe.h"

#define FUZZ_SEED0 0x5eedf00dull
#define CANARY     1234.5f

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint64_t rows = 1 + (uint64_t)((data[0] | (unsigned)data[1] << 8) % 3000);
    uint32_t n = 1 + data[2] % 9, j = (uint32_t)(data[2] / 9) % n, w = 1 + data[3] % 4;
    /* the blob in its own allocation, so a read past its end is caught by ASan */
    size_t len = size - 4;
    unsigned char *blob = malloc(len ? len : 1);
    if (!blob)
        return 0;
    if (len)
        memcpy(blob, data + 4, len);
    zen_universe *u = NULL;
    if (zen__universe_build(rows, n, FUZZ_SEED0, &u) != ZEN_OK) {
        free(blob);
        return 0;
    }
    size_t count = 0;
    zen_status st = zen__hb_check(blob, len, u, j, w, &count);
    REQUIRE(st == ZEN_OK || st == ZEN_EPROTO);
    float *dense = malloc((size_t)rows * w * sizeof *dense);
    for (size_t i = 0; i < (size_t)rows * w; i++)
        dense[i] = CANARY;
    zen_status sd = zen__hb_decode_dense(blob, len, u, j, w, 2.0f, dense);
    zen_coo out = { rows, w, 0, 0, NULL, NULL };
    zen_status sc = zen__hb_decode_coo(blob, len, u, j, w, 1.0f, &out);
    REQUIRE(sd == st && (sc == st || sc == ZEN_ENOMEM));
    if (st != ZEN_OK) {
        for (size_t i = 0; i < (size_t)rows * w; i++)
            REQUIRE(memcmp(&dense[i], &(float){ CANARY }, sizeof(float)) == 0);
    } else if (sc == ZEN_OK) {
        REQUIRE(out.nnz == count);
        size_t k = 0;
        for (uint64_t x = 0; x < rows; x++) {
            int present = k < out.nnz && out.idx[k] == x;
            if (present) {
                REQUIRE(k == 0 || out.idx[k] > out.idx[k - 1]);
                REQUIRE(zen_hh_owner((uint32_t)x, FUZZ_SEED0, n) == j);
                for (uint32_t c = 0; c < w; c++) {
                    float a = dense[x * w + c], b = out.val[k * w + c] / 2.0f;
                    REQUIRE(memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b));
                }
                k++;
            } else {
                for (uint32_t c = 0; c < w; c++)
                    REQUIRE(memcmp(&dense[x * w + c], &(float){ CANARY }, sizeof(float)) == 0);
            }
        }
        REQUIRE(k == out.nnz);
    }
    zen__coo_release(&out);
    free(dense);
    zen__universe_free(u);
    free(blob);
    return 0;
}
