/*
 * Gap-coded row indices: a strictly ascending index list as LEB128 varints of its gaps, for the
 * pulls of global top-k (BALANCED's ZEN_HB_GAP blobs, PS's pull). An owner's kept rows there lie
 * about n rows / k apart (BALANCED: hashed owners) or rows / k apart (PS: ranges), so most gaps
 * take 1 or 2 bytes instead of an index's 4.
 *
 * Stream: the first index minus base, then each index minus the previous one minus 1 (the list
 * is strictly ascending, so 0 is a gap of one row), each as a LEB128 varint: 7 bits per byte,
 * low bits first, the top bit set on every byte but the last. A u32 gap takes 1 to 5 bytes:
 * < 2^7 one, < 2^14 two, < 2^21 three.
 */
#ifndef ZEN_SPARSE_GAP_H
#define ZEN_SPARSE_GAP_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

/* Bytes of the stream of idx[0..c) (strictly ascending, idx[0] >= base). */
size_t zen__gap_bytes(const uint32_t *idx, size_t c, uint32_t base);

/* Write the stream of idx[0..c) to out (zen__gap_bytes(idx, c, base) bytes); returns them. */
size_t zen__gap_encode(const uint32_t *idx, size_t c, uint32_t base, unsigned char *out);

/*
 * Decode the next index of a stream in[0..len) at *at into *x, advancing *at; *next is the
 * smallest index the varint may give (base first, then the previous index + 1) and is advanced
 * too. ZEN_EPROTO when the stream ends inside the varint, the varint is longer than 5 bytes or
 * the index reaches hi (>= 2^32 included). Reads only [in, in + len).
 * Inline: the decoders' inner loop.
 */
static inline zen_status zen__gap_next(const unsigned char *in, size_t len, size_t *at,
                                       uint64_t *next, uint64_t hi, uint32_t *x)
{
    uint64_t g = 0;
    size_t a = *at;
    for (int shift = 0;; shift += 7) {
        if (a == len || shift > 28)
            return ZEN_EPROTO; /* the stream ends inside a varint, or it runs past 5 bytes */
        unsigned char b = in[a++];
        g |= (uint64_t)(b & 0x7fu) << shift;
        if (!(b & 0x80u))
            break;
    }
    uint64_t v = *next + g;
    if (v >= hi || v > UINT32_MAX)
        return ZEN_EPROTO;
    *x = (uint32_t)v;
    *next = v + 1;
    *at = a;
    return ZEN_OK;
}

/* Decode c indices from in[0..len) into idx (zen__gap_next c times from base); *used gets the
 * bytes they took (the caller checks what follows them). */
zen_status zen__gap_decode(const unsigned char *in, size_t len, size_t c, uint32_t base,
                           uint64_t hi, uint32_t *idx, size_t *used);

#endif
