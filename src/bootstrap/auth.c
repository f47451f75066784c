#include "bootstrap/auth.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/input.h"
#include "common/tunables.h"

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_ok;

static void init_sodium(void)
{
    sodium_ok = sodium_init() >= 0;
}

static void ensure_sodium(void)
{
    pthread_once(&sodium_once, init_sodium);
    if (!sodium_ok)
        abort(); /* no randomness source: nothing in the job could be trusted */
}

void zen__job_key_from_secret(zen_job_key *key, const void *secret, size_t len)
{
    ensure_sodium();
    crypto_hash_sha256(key->k, secret, len);
    key->set = 1;
}

zen_status zen__job_key_from_env(zen_job_key *key, char *err, size_t err_size)
{
    memset(key, 0, sizeof *key);
    const char *s = NULL, *path = NULL;
    char why[512];
    int have = zen__param_strict("JOB_SECRET", &s, why, sizeof why);
    if (have > 0) {
        zen__job_key_from_secret(key, s, strlen(s));
        return ZEN_OK;
    }
    if (have == 0)
        have = zen__param_strict("JOB_SECRET_FILE", &path, why, sizeof why);
    if (have < 0) { /* a secret given but unusable: running open instead would be worse */
        snprintf(err, err_size, "%s", why);
        return ZEN_EINVAL;
    }
    if (have == 0)
        return ZEN_OK;
    uint64_t size = 0;
    FILE *f = zen__open_input(path, ZEN_AUTH_SECRET_MAX, &size, why, sizeof why);
    if (!f) {
        snprintf(err, err_size, "ZEN_JOB_SECRET_FILE: %s", why);
        return ZEN_EINVAL;
    }
    unsigned char buf[ZEN_AUTH_SECRET_MAX];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n == 0) {
        snprintf(err, err_size, "ZEN_JOB_SECRET_FILE %s is empty", path);
        return ZEN_EINVAL;
    }
    zen__job_key_from_secret(key, buf, n);
    sodium_memzero(buf, sizeof buf);
    return ZEN_OK;
}

zen_status zen__job_key_required(const zen_job_key *key, char *err, size_t err_size)
{
    const char *v = NULL;
    char why[300];
    long require = 0;
    int have = zen__param_strict("REQUIRE_SECRET", &v, why, sizeof why);
    if (have < 0) {
        snprintf(err, err_size, "%s (0 or 1)", why);
        return ZEN_EINVAL;
    }
    if (have > 0 && zen__param_check_long("REQUIRE_SECRET", v, &require, why, sizeof why) != 0)
        require = 1; /* unreachable: the strict read checked it */
    if (require == 1 && !key->set) {
        snprintf(err, err_size,
                 "ZEN_REQUIRE_SECRET=1 but no job secret: set ZEN_JOB_SECRET or "
                 "ZEN_JOB_SECRET_FILE on every rank (zen launch does)");
        return ZEN_EINVAL;
    }
    return ZEN_OK;
}

void zen__auth_nonce(unsigned char nonce[ZEN_AUTH_NONCE_BYTES])
{
    ensure_sodium();
    randombytes_buf(nonce, ZEN_AUTH_NONCE_BYTES);
}

void zen__auth_mac(const zen_job_key *key, const char label[8], const unsigned char *transcript,
                   size_t len, unsigned char mac[ZEN_AUTH_MAC_BYTES])
{
    ensure_sodium();
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key->k, sizeof key->k);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, 8);
    crypto_auth_hmacsha256_update(&st, transcript, len);
    crypto_auth_hmacsha256_final(&st, mac);
}

int zen__auth_verify(const zen_job_key *key, const char label[8], const unsigned char *transcript,
                     size_t len, const unsigned char mac[ZEN_AUTH_MAC_BYTES])
{
    unsigned char want[ZEN_AUTH_MAC_BYTES];
    zen__auth_mac(key, label, transcript, len, want);
    return sodium_memcmp(want, mac, sizeof want) == 0;
}
