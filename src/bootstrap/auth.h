/*
 * Job authentication for the tcp rendezvous (docs/security.md).
 *
 * Every rank of a job holds the same secret (ZEN_JOB_SECRET, ZEN_JOB_SECRET_FILE, or handed in by
 * a launcher such as the c10d store path). The key is SHA-256 of the secret; a connection proves
 * it with HMAC-SHA256 over a transcript that holds fresh random nonces of both ends, both ranks,
 * the world size and the connecting rank's advertised address, so a recorded exchange cannot be
 * replayed and a proof for one connection is worthless for another. Comparison is constant-time
 * (libsodium).
 */
#ifndef ZEN_BOOTSTRAP_AUTH_H
#define ZEN_BOOTSTRAP_AUTH_H

#include <stddef.h>

#include <zen/zen.h>

#define ZEN_AUTH_NONCE_BYTES 32
#define ZEN_AUTH_MAC_BYTES   32
#define ZEN_AUTH_SECRET_MAX  4096 /* longest secret file read */

typedef struct zen_job_key {
    int set;             /* 0: the job runs without a secret (no authentication) */
    unsigned char k[32]; /* SHA-256 of the secret */
} zen_job_key;

/* The job key from ZEN_JOB_SECRET, else the contents of ZEN_JOB_SECRET_FILE (a regular file of
 * at most ZEN_AUTH_SECRET_MAX bytes; one trailing newline is ignored), else key->set = 0.
 * ZEN_EINVAL with a reason in err when the file cannot be read or the secret is empty. */
zen_status zen__job_key_from_env(zen_job_key *key, char *err, size_t err_size);

/* ZEN_EINVAL with the reason in err when ZEN_REQUIRE_SECRET=1 and key is not set (or when
 * ZEN_REQUIRE_SECRET is malformed). Every builder of a mesh of sockets calls it before it
 * connects or accepts anyone: the env rendezvous and the Store rendezvous, which serve the tcp,
 * shm (its liveness sockets) and shm+tcp transports alike. */
zen_status zen__job_key_required(const zen_job_key *key, char *err, size_t err_size);

/* The job key of an explicit secret (len > 0), e.g. one a launcher passed through a store. */
void zen__job_key_from_secret(zen_job_key *key, const void *secret, size_t len);

/* Fill a nonce with random bytes (libsodium's CSPRNG). */
void zen__auth_nonce(unsigned char nonce[ZEN_AUTH_NONCE_BYTES]);

/* HMAC-SHA256 under key of label (8 bytes, separates the two directions) and transcript. */
void zen__auth_mac(const zen_job_key *key, const char label[8], const unsigned char *transcript,
                   size_t len, unsigned char mac[ZEN_AUTH_MAC_BYTES]);

/* 1 when mac is zen__auth_mac of the same inputs (constant-time compare), else 0. */
int zen__auth_verify(const zen_job_key *key, const char label[8], const unsigned char *transcript,
                     size_t len, const unsigned char mac[ZEN_AUTH_MAC_BYTES]);

#endif
