/* The shm hand-over message: encoding and the check of received bytes (see shm_hand.h). */
#include "transport/shm_hand.h"

#include <string.h>

#include "transport/shm_seg.h"

void zen__shm_hand_encode(unsigned char out[ZEN_SHM_HAND_BYTES], uint32_t rank, uint64_t seg_bytes)
{
    uint32_t magic = ZEN_SHM_MAGIC;
    memcpy(out, &magic, 4);
    memcpy(out + 4, &rank, 4);
    memcpy(out + 8, &seg_bytes, 8);
}

int zen__shm_hand_parse(const unsigned char *buf, size_t n, uint32_t want_rank, zen_shm_hand *out)
{
    if (n > ZEN_SHM_HAND_BYTES)
        return -1;
    if (n == 0)
        return 1;
    /* compare what has arrived of the magic and the rank, so that a stranger's first bytes
     * already end the wait */
    unsigned char want[8];
    uint32_t magic = ZEN_SHM_MAGIC;
    memcpy(want, &magic, 4);
    memcpy(want + 4, &want_rank, 4);
    size_t check = want_rank == ZEN_SHM_HAND_ANY_RANK ? 4 : sizeof want;
    if (memcmp(buf, want, n < check ? n : check) != 0)
        return -1;
    if (n < ZEN_SHM_HAND_BYTES)
        return 1;
    memcpy(&out->rank, buf + 4, 4);
    memcpy(&out->seg_bytes, buf + 8, 8);
    return 0;
}
