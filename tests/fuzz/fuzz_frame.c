/*
 * libFuzzer target for the tcp frame header check (zen__tcp_parse_header, src/transport/
 * tcp_frame.c), which guards every byte a reader thread takes from the network. Also linked
 * into fuzz_frame_replay (replay.c).
 *
 * Input: a 24-byte header (shorter inputs are zero-padded). Invariants (a violation traps): an
 * accepted header has our magic and version, a known kind and a length within that kind's
 * bound; a header with another magic or version is never accepted.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_require.h"
#include "transport/tcp_internal.h"
#include "transport/tcp_sock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char h[ZEN_TCP_HEADER_BYTES] = { 0 };
    memcpy(h, data, size < sizeof h ? size : sizeof h);
    uint32_t kind = 0;
    uint64_t tag = 0, len = 0;
    int rc = zen__tcp_parse_header(h, &kind, &tag, &len);
    int ours = zen_get_u32(h) == ZEN_TCP_MAGIC && zen_get_u16(h + 4) == ZEN_TCP_VERSION;
    REQUIRE(ours || rc == -1);
    if (rc == 0) {
        REQUIRE(kind == ZEN_TCP_KIND_DATA || kind == ZEN_TCP_KIND_ABORT ||
                kind == ZEN_TCP_KIND_HEARTBEAT);
        REQUIRE(kind != ZEN_TCP_KIND_DATA || len <= ZEN_TCP_MAX_PAYLOAD);
        REQUIRE(kind != ZEN_TCP_KIND_ABORT || len <= ZEN_TCP_MAX_REASON);
        REQUIRE(kind != ZEN_TCP_KIND_HEARTBEAT || len == 0);
        REQUIRE(tag == zen_get_u64(h + 8) && len == zen_get_u64(h + 16));
    }
    return 0;
}
