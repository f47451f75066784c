/*
 * libFuzzer target for the rendezvous message parsers (src/bootstrap/rdv_msg.c) and the proof
 * check of a handshake. Also linked into fuzz_rdv_replay (replay.c) for ordinary builds.
 *
 * Input: any bytes. Each parser sees them whole; invariants (a violation traps): a parsed
 * REGISTER/HELLO re-encodes to the same bytes; a parsed CHALLENGE too; an ACK/TABLE head parses
 * only at its exact size; a proof taken from the input (bytes 8..40 after a 104-byte
 * transcript) verifies only if it equals the real HMAC, i.e. never by accident.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/auth.h"
#include "bootstrap/rdv_msg.h"
#include "fuzz_require.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zen_rdv_first m;
    int rc = zen__rdv_parse_first(data, size, &m);
    if (rc == 0) {
        unsigned char back[ZEN_RDV_FIRST_BYTES];
        REQUIRE(size == ZEN_RDV_FIRST_BYTES);
        REQUIRE(m.kind == ZEN_RDV_REGISTER || m.kind == ZEN_RDV_HELLO);
        zen__rdv_encode_first(back, &m);
        /* HELLO leaves the port field as sent; everything else must round-trip */
        REQUIRE(memcmp(back, data, ZEN_RDV_FIRST_BYTES) == 0);
    }
    zen_rdv_challenge c;
    if (zen__rdv_parse_challenge(data, size, &c) == 0) {
        unsigned char back[ZEN_RDV_CHALLENGE_BYTES];
        REQUIRE(size == ZEN_RDV_CHALLENGE_BYTES);
        zen__rdv_encode_challenge(back, &c);
        REQUIRE(memcmp(back, data, ZEN_RDV_CHALLENGE_BYTES) == 0);
    }
    uint32_t rank, wsize;
    if (zen__rdv_parse_ack(data, size, ZEN_RDV_ACK, &rank, &wsize) == 0 ||
        zen__rdv_parse_ack(data, size, ZEN_RDV_TABLE, &rank, &wsize) == 0)
        REQUIRE(size == ZEN_RDV_ACK_BYTES);
    if (size >= ZEN_RDV_TABLE_ENTRY_BYTES) {
        uint32_t addr;
        uint16_t port;
        zen__rdv_parse_entry(data, &addr, &port);
    }
    if (size >= ZEN_RDV_TRANSCRIPT_BYTES + ZEN_AUTH_MAC_BYTES) {
        static zen_job_key key;
        if (!key.set)
            zen__job_key_from_secret(&key, "fuzz", 4);
        const unsigned char *proof = data + ZEN_RDV_TRANSCRIPT_BYTES;
        unsigned char want[ZEN_AUTH_MAC_BYTES];
        zen__auth_mac(&key, ZEN_RDV_LABEL_CLIENT, data, ZEN_RDV_TRANSCRIPT_BYTES, want);
        int ok =
            zen__auth_verify(&key, ZEN_RDV_LABEL_CLIENT, data, ZEN_RDV_TRANSCRIPT_BYTES, proof);
        REQUIRE(ok == (memcmp(want, proof, sizeof want) == 0));
    }
    return 0;
}
