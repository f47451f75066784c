/*
 * libFuzzer target for the shm hand-over message check (zen__shm_hand_parse, src/transport/
 * shm_hand.c), which reads the bytes a local rank's process sends over the setup socket. Also
 * linked into fuzz_shmboot_replay (replay.c).
 *
 * Input: 4 bytes of the rank the connection is expected from (host order, zero-padded), then
 * the bytes received. Every prefix is checked as it would arrive piece by piece. Invariants (a
 * violation traps): a message is accepted only when it is exactly 16 bytes with our magic and
 * the expected rank (any rank for ZEN_SHM_HAND_ANY_RANK), and then it carries the sent rank and
 * segment size; a prefix is never accepted;
 * once a prefix is refused every longer one is; encode then parse gives back what was encoded.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_require.h"
#include "transport/shm_hand.h"
#include "transport/shm_seg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t want = 0;
    memcpy(&want, data, size < 4 ? size : 4);
    const uint8_t *msg = size > 4 ? data + 4 : data;
    size_t n = size > 4 ? size - 4 : 0;
    int refused = 0;
    for (size_t k = 0; k <= n; k++) {
        zen_shm_hand h = { 0xdeadbeefu, 0 };
        int r = zen__shm_hand_parse(msg, k, want, &h);
        REQUIRE(r == 0 || r == 1 || r == -1);
        REQUIRE(!refused || r == -1);
        refused = r == -1;
        REQUIRE(k <= ZEN_SHM_HAND_BYTES || r == -1);
        REQUIRE(k == ZEN_SHM_HAND_BYTES || r != 0);
        if (r == 0) {
            uint32_t magic, rank;
            uint64_t seg;
            memcpy(&magic, msg, 4);
            memcpy(&rank, msg + 4, 4);
            memcpy(&seg, msg + 8, 8);
            REQUIRE(magic == ZEN_SHM_MAGIC && (rank == want || want == ZEN_SHM_HAND_ANY_RANK));
            REQUIRE(h.rank == rank && h.seg_bytes == seg);
        } else {
            REQUIRE(h.rank == 0xdeadbeefu); /* nothing filled in */
        }
    }
    /* round trip with the segment size taken from the input */
    uint64_t seg = 0;
    memcpy(&seg, msg, n < 8 ? n : 8);
    unsigned char enc[ZEN_SHM_HAND_BYTES];
    zen__shm_hand_encode(enc, want, seg);
    zen_shm_hand h;
    REQUIRE(zen__shm_hand_parse(enc, sizeof enc, want, &h) == 0);
    REQUIRE(h.rank == want && h.seg_bytes == seg);
    if (want + 1 != ZEN_SHM_HAND_ANY_RANK)
        REQUIRE(zen__shm_hand_parse(enc, sizeof enc, want + 1, &h) == -1);
    return 0;
}
