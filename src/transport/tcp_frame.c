#include "transport/tcp_internal.h"
#include "transport/tcp_sock.h"

int zen__tcp_parse_header(const unsigned char h[ZEN_TCP_HEADER_BYTES], uint32_t *kind,
                          uint64_t *tag, uint64_t *len)
{
    if (zen_get_u32(h) != ZEN_TCP_MAGIC || zen_get_u16(h + 4) != ZEN_TCP_VERSION)
        return -1;
    *kind = zen_get_u16(h + 6);
    *tag = zen_get_u64(h + 8);
    *len = zen_get_u64(h + 16);
    switch (*kind) {
    case ZEN_TCP_KIND_DATA:
        return *len <= ZEN_TCP_MAX_PAYLOAD ? 0 : -2;
    case ZEN_TCP_KIND_ABORT:
        return *len <= ZEN_TCP_MAX_REASON ? 0 : -2;
    case ZEN_TCP_KIND_HEARTBEAT:
        return *len == 0 ? 0 : -2;
    default:
        return -2;
    }
}
