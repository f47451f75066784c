/*
 * Rendezvous messages (docs/wire-format.md): fixed-size little-endian records, encoded and
 * parsed by pure functions (no I/O), so the parser can be fuzzed on its own
 * (tests/fuzz/fuzz_rdv.c). A parser never trusts a length or count before checking it.
 */
#ifndef ZEN_BOOTSTRAP_RDV_MSG_H
#define ZEN_BOOTSTRAP_RDV_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/auth.h"

#define ZEN_RDV_MAGIC   0x5244455au /* "ZEDR" read as little-endian bytes */
#define ZEN_RDV_VERSION 2u

enum {
    ZEN_RDV_REGISTER = 1,  /* rank i > 0 to rank 0: opens a registration */
    ZEN_RDV_TABLE = 2,     /* rank 0 to each rank: the address table (also the registration ack) */
    ZEN_RDV_HELLO = 3,     /* rank i to rank j < i: opens a mesh connection */
    ZEN_RDV_CHALLENGE = 4, /* answer to REGISTER/HELLO: server nonce and server proof */
    ZEN_RDV_PROOF = 5,     /* client proof */
    ZEN_RDV_ACK = 6        /* mesh connection accepted */
};

enum {
    ZEN_RDV_HEAD_BYTES = 8,
    ZEN_RDV_FIRST_BYTES = 56, /* REGISTER and HELLO */
    ZEN_RDV_CHALLENGE_BYTES = 80,
    ZEN_RDV_PROOF_BYTES = 40,
    ZEN_RDV_ACK_BYTES = 16,
    ZEN_RDV_TABLE_HEAD_BYTES = 16,
    ZEN_RDV_TABLE_ENTRY_BYTES = 8,
    /* the bytes both proofs are computed over: FIRST, then CHALLENGE up to its proof */
    ZEN_RDV_TRANSCRIPT_BYTES = ZEN_RDV_FIRST_BYTES + 48
};

#define ZEN_RDV_FLAG_AUTH 1u /* the sender holds a job secret */

/* REGISTER or HELLO: the first message of a connection. */
typedef struct zen_rdv_first {
    uint16_t kind;
    uint32_t rank, size;
    uint32_t addr_be; /* REGISTER: the sender's data listener address (network order) */
    uint32_t target;  /* HELLO: the rank the sender wants to reach */
    uint16_t port;    /* REGISTER: the sender's data listener port */
    uint16_t flags;
    unsigned char nonce[ZEN_AUTH_NONCE_BYTES];
} zen_rdv_first;

typedef struct zen_rdv_challenge {
    uint32_t rank, size; /* the answering rank */
    unsigned char nonce[ZEN_AUTH_NONCE_BYTES];
    unsigned char mac[ZEN_AUTH_MAC_BYTES];
} zen_rdv_challenge;

/* Header check of len bytes at b: 0 ours with this kind, -1 not ours (short, magic, kind),
 * -2 ours but another protocol version. */
int zen__rdv_check_head(const unsigned char *b, size_t len, uint16_t kind);
void zen__rdv_put_head(unsigned char *b, uint16_t kind);

void zen__rdv_encode_first(unsigned char b[ZEN_RDV_FIRST_BYTES], const zen_rdv_first *m);
/* 0, -1 (not a REGISTER/HELLO of ours) or -2 (other version: m->rank and size still filled). */
int zen__rdv_parse_first(const unsigned char *b, size_t len, zen_rdv_first *m);

void zen__rdv_encode_challenge(unsigned char b[ZEN_RDV_CHALLENGE_BYTES],
                               const zen_rdv_challenge *c);
int zen__rdv_parse_challenge(const unsigned char *b, size_t len, zen_rdv_challenge *c);

/* ACK and the TABLE head: kind, rank (ACK) or 0, world size. 0 or -1. */
void zen__rdv_encode_ack(unsigned char b[ZEN_RDV_ACK_BYTES], uint16_t kind, uint32_t rank,
                         uint32_t size);
int zen__rdv_parse_ack(const unsigned char *b, size_t len, uint16_t kind, uint32_t *rank,
                       uint32_t *size);

/* TABLE entry p: address (network order) and port. */
void zen__rdv_encode_entry(unsigned char b[ZEN_RDV_TABLE_ENTRY_BYTES], uint32_t addr_be,
                           uint16_t port);
void zen__rdv_parse_entry(const unsigned char b[ZEN_RDV_TABLE_ENTRY_BYTES], uint32_t *addr_be,
                          uint16_t *port);

/* The transcript both proofs cover: the FIRST bytes, then the CHALLENGE's first 48 bytes (head,
 * answering rank, size, nonce). out has ZEN_RDV_TRANSCRIPT_BYTES. */
void zen__rdv_transcript(unsigned char *out, const unsigned char first[ZEN_RDV_FIRST_BYTES],
                         const unsigned char challenge[ZEN_RDV_CHALLENGE_BYTES]);

/* Labels of the two proofs: the answering side ("server") and the connecting side. */
#define ZEN_RDV_LABEL_SERVER "zenrdvS2"
#define ZEN_RDV_LABEL_CLIENT "zenrdvC2"

#endif
