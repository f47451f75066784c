#include "bootstrap/rdv_msg.h"

#include <string.h>

#include "transport/tcp_sock.h"

int zen__rdv_check_head(const unsigned char *b, size_t len, uint16_t kind)
{
    if (len < ZEN_RDV_HEAD_BYTES || zen_get_u32(b) != ZEN_RDV_MAGIC)
        return -1;
    if (zen_get_u16(b + 4) != ZEN_RDV_VERSION)
        return -2;
    return zen_get_u16(b + 6) == kind ? 0 : -1;
}

void zen__rdv_put_head(unsigned char *b, uint16_t kind)
{
    zen_put_u32(b, ZEN_RDV_MAGIC);
    zen_put_u16(b + 4, ZEN_RDV_VERSION);
    zen_put_u16(b + 6, kind);
}

void zen__rdv_encode_first(unsigned char b[ZEN_RDV_FIRST_BYTES], const zen_rdv_first *m)
{
    memset(b, 0, ZEN_RDV_FIRST_BYTES);
    zen__rdv_put_head(b, m->kind);
    zen_put_u32(b + 8, m->rank);
    zen_put_u32(b + 12, m->size);
    if (m->kind == ZEN_RDV_REGISTER)
        memcpy(b + 16, &m->addr_be, 4);
    else
        zen_put_u32(b + 16, m->target);
    zen_put_u16(b + 20, m->port);
    zen_put_u16(b + 22, m->flags);
    memcpy(b + 24, m->nonce, ZEN_AUTH_NONCE_BYTES);
}

int zen__rdv_parse_first(const unsigned char *b, size_t len, zen_rdv_first *m)
{
    memset(m, 0, sizeof *m);
    if (len < ZEN_RDV_HEAD_BYTES || zen_get_u32(b) != ZEN_RDV_MAGIC)
        return -1;
    m->kind = zen_get_u16(b + 6);
    /* an older or newer peer: its rank and size (same offsets in version 1) name it */
    if (zen_get_u16(b + 4) != ZEN_RDV_VERSION) {
        if (len >= 16) {
            m->rank = zen_get_u32(b + 8);
            m->size = zen_get_u32(b + 12);
        }
        return -2;
    }
    if (len != ZEN_RDV_FIRST_BYTES || (m->kind != ZEN_RDV_REGISTER && m->kind != ZEN_RDV_HELLO))
        return -1;
    m->rank = zen_get_u32(b + 8);
    m->size = zen_get_u32(b + 12);
    if (m->kind == ZEN_RDV_REGISTER)
        memcpy(&m->addr_be, b + 16, 4);
    else
        m->target = zen_get_u32(b + 16);
    m->port = zen_get_u16(b + 20);
    m->flags = zen_get_u16(b + 22);
    memcpy(m->nonce, b + 24, ZEN_AUTH_NONCE_BYTES);
    return 0;
}

void zen__rdv_encode_challenge(unsigned char b[ZEN_RDV_CHALLENGE_BYTES], const zen_rdv_challenge *c)
{
    zen__rdv_put_head(b, ZEN_RDV_CHALLENGE);
    zen_put_u32(b + 8, c->rank);
    zen_put_u32(b + 12, c->size);
    memcpy(b + 16, c->nonce, ZEN_AUTH_NONCE_BYTES);
    memcpy(b + 48, c->mac, ZEN_AUTH_MAC_BYTES);
}

int zen__rdv_parse_challenge(const unsigned char *b, size_t len, zen_rdv_challenge *c)
{
    memset(c, 0, sizeof *c);
    if (len != ZEN_RDV_CHALLENGE_BYTES || zen__rdv_check_head(b, len, ZEN_RDV_CHALLENGE) != 0)
        return -1;
    c->rank = zen_get_u32(b + 8);
    c->size = zen_get_u32(b + 12);
    memcpy(c->nonce, b + 16, ZEN_AUTH_NONCE_BYTES);
    memcpy(c->mac, b + 48, ZEN_AUTH_MAC_BYTES);
    return 0;
}

void zen__rdv_encode_ack(unsigned char b[ZEN_RDV_ACK_BYTES], uint16_t kind, uint32_t rank,
                         uint32_t size)
{
    zen__rdv_put_head(b, kind);
    zen_put_u32(b + 8, kind == ZEN_RDV_TABLE ? size : rank);
    zen_put_u32(b + 12, kind == ZEN_RDV_TABLE ? 0 : size);
}

int zen__rdv_parse_ack(const unsigned char *b, size_t len, uint16_t kind, uint32_t *rank,
                       uint32_t *size)
{
    if (len != ZEN_RDV_ACK_BYTES || zen__rdv_check_head(b, len, kind) != 0)
        return -1;
    *rank = kind == ZEN_RDV_TABLE ? 0 : zen_get_u32(b + 8);
    *size = kind == ZEN_RDV_TABLE ? zen_get_u32(b + 8) : zen_get_u32(b + 12);
    return 0;
}

void zen__rdv_encode_entry(unsigned char b[ZEN_RDV_TABLE_ENTRY_BYTES], uint32_t addr_be,
                           uint16_t port)
{
    memset(b, 0, ZEN_RDV_TABLE_ENTRY_BYTES);
    memcpy(b, &addr_be, 4);
    zen_put_u16(b + 4, port);
}

void zen__rdv_parse_entry(const unsigned char b[ZEN_RDV_TABLE_ENTRY_BYTES], uint32_t *addr_be,
                          uint16_t *port)
{
    memcpy(addr_be, b, 4);
    *port = zen_get_u16(b + 4);
}

void zen__rdv_transcript(unsigned char *out, const unsigned char first[ZEN_RDV_FIRST_BYTES],
                         const unsigned char challenge[ZEN_RDV_CHALLENGE_BYTES])
{
    memcpy(out, first, ZEN_RDV_FIRST_BYTES);
    memcpy(out + ZEN_RDV_FIRST_BYTES, challenge, 48);
}
