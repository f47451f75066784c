/*
 * What every fuzz target shares: the libFuzzer entry point (also called by replay.c's main) and
 * REQUIRE, an invariant check that traps, so that libFuzzer and the replay test both see a
 * broken invariant as a crash.
 */
#ifndef ZEN_TESTS_FUZZ_REQUIRE_H
#define ZEN_TESTS_FUZZ_REQUIRE_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)         \
    do {                      \
        if (!(cond))          \
            __builtin_trap(); \
    } while (0)

#endif
