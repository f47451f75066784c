#include <errno.h>
#include <time.h>

#include "common/clock.h"
#include "common/hash.h"

void zen__sleep_ns(int64_t ns)
{
    if (ns <= 0)
        return;
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

uint64_t zen__fnv1a(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
