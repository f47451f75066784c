/* A tiny corpus for the trainer tests: n lines of three-word verses ("the cat saw bread .")
 * drawn from fixed word lists with seed, so a test's losses are reproducible. Header-only
 * because libzen_testutil does not link the training library. */
#ifndef ZEN_TESTS_TRAIN_FIXTURE_H
#define ZEN_TESTS_TRAIN_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "train/train.h"

static inline zen_status zt_verse_dataset(uint64_t seed, size_t n, zen_dataset **out)
{
    static const char *subj[] = { "the cat", "a dog", "my lord", "the king's son", "moses" };
    static const char *verb[] = { "saw", "ate", "blessed", "went unto", "spake to" };
    static const char *obj[] = { "the mat", "bread", "the people", "egypt", "a fish" };
    char **lines = calloc(n, sizeof *lines);
    if (!lines)
        return ZEN_ENOMEM;
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s %s %s .", subj[zt_rand(&s) % 5], verb[zt_rand(&s) % 5],
                 obj[zt_rand(&s) % 5]);
        lines[i] = strdup(buf);
    }
    zen_data_options o = ZEN_DATA_OPTIONS_INIT;
    o.min_count = 1;
    zen_status st = zen_dataset_from_lines((const char *const *)lines, n, &o, out);
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    return st;
}

#endif
