/*
 * libFuzzer target for trainer checkpoints (zen_ckpt_load, src/train/checkpoint.c), which
 * `zen train --resume` reads. Also linked into fuzz_ckpt_replay (replay.c).
 *
 * Input: one control byte, then the file. Control bit 0 rewrites the header's payload size and
 * both FNV-1a sums to match the bytes, so that mutations get past the checksums into the section
 * table; bit 1 loads without a configuration to compare (as the first key-value check would
 * otherwise stop most inputs).
 * The loader asks for two sections, "w" of 5 floats and "m" of 3 (the seeds hold them).
 * Invariants (a violation traps): an accepted checkpoint fills both with finite values; a refused
 * one leaves the destination buffers untouched (checkpoint.h) and says why in err.
 */
#define _GNU_SOURCE /* memfd_create (fuzz_file.h) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "fuzz_file.h"
#include "hash.h"

/* the header of src/train/checkpoint.c: magic[8], version, reserved (u32), then u64 step,
 * config_bytes, nsections, payload_bytes, payload_sum, header_sum */
#define HDR_BYTES       64
#define HDR_PAYLOAD     40
#define HDR_PAYLOAD_SUM 48
#define HDR_SUM         56
#define HDR_SUM_SEED    0x636b7074ull

static void put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v); /* the checkpoint layout is host order */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len = 0;
    uint8_t *file = fuzz_body(data, size, &len);
    if (!file)
        return 0;
    if ((data[0] & 1) && len >= HDR_BYTES) {
        put_u64(file + HDR_PAYLOAD, len - HDR_BYTES);
        put_u64(file + HDR_PAYLOAD_SUM,
                zen_train_fnv1a_update(ZEN_TRAIN_FNV_BASIS, file + HDR_BYTES, len - HDR_BYTES));
        put_u64(file + HDR_SUM, zen_train_fnv1a(file, HDR_SUM, HDR_SUM_SEED));
    }
    const char *path = fuzz_file(file, len);
    free(file);
    if (!path)
        return 0;
    float w[5], m[3];
    for (size_t i = 0; i < 5; i++)
        w[i] = -7.0f;
    for (size_t i = 0; i < 3; i++)
        m[i] = -7.0f;
    zen_ckpt_section sec[2] = { { "w", w, 5 }, { "m", m, 3 } };
    uint64_t step = 12345;
    char err[512] = "";
    zen_status st = zen_ckpt_load(path, (data[0] & 2) ? NULL : "layers=1\nd_model=4\n", &step, sec,
                                  2, err, sizeof err);
    if (st == ZEN_OK) {
        for (size_t i = 0; i < 5; i++)
            REQUIRE(isfinite(w[i]));
        for (size_t i = 0; i < 3; i++)
            REQUIRE(isfinite(m[i]));
        return 0;
    }
    REQUIRE(step == 12345 && err[0] != 0 && memchr(err, 0, sizeof err) != NULL);
    for (size_t i = 0; i < 5; i++)
        REQUIRE(w[i] == -7.0f);
    for (size_t i = 0; i < 3; i++)
        REQUIRE(m[i] == -7.0f);
    return 0;
}
