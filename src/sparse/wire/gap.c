/*
 * Gap-coded row indices (format in gap.h). Encoding is one pass with no table; decoding checks
 * every varint's length and every index against the bound as it goes, so a corrupt stream is
 * refused without reading past its end.
 */
#include "sparse/wire/gap.h"

static size_t varint_len(uint32_t g)
{
    return g < (1u << 7) ? 1 : g < (1u << 14) ? 2 : g < (1u << 21) ? 3 : g < (1u << 28) ? 4 : 5;
}

size_t zen__gap_bytes(const uint32_t *idx, size_t c, uint32_t base)
{
    size_t bytes = 0;
    uint32_t prev = base;
    for (size_t i = 0; i < c; i++) {
        bytes += varint_len(idx[i] - prev);
        prev = idx[i] + 1;
    }
    return bytes;
}

size_t zen__gap_encode(const uint32_t *idx, size_t c, uint32_t base, unsigned char *out)
{
    unsigned char *p = out;
    uint32_t prev = base;
    for (size_t i = 0; i < c; i++) {
        uint32_t g = idx[i] - prev;
        while (g >= 0x80u) {
            *p++ = (unsigned char)(g | 0x80u);
            g >>= 7;
        }
        *p++ = (unsigned char)g;
        prev = idx[i] + 1;
    }
    return (size_t)(p - out);
}

zen_status zen__gap_decode(const unsigned char *in, size_t len, size_t c, uint32_t base,
                           uint64_t hi, uint32_t *idx, size_t *used)
{
    size_t at = 0;
    uint64_t next = base;
    for (size_t i = 0; i < c; i++) {
        zen_status st = zen__gap_next(in, len, &at, &next, hi, &idx[i]);
        if (st != ZEN_OK)
            return st;
    }
    *used = at;
    return ZEN_OK;
}
