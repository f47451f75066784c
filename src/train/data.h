/*
 * data.h - the training corpus: text -> token file (cached) -> batches.
 *
 * The corpus is a list of lines (verses). The default is the King James Bible printed by
 * `bible -f "Gen1:1-Rev22:21"` (Debian bible-kjv), one verse per line, each line starting with a
 * reference such as "1Sm3:10 " that is stripped; any UTF-8 text file works too (its lines, empty
 * ones skipped). The last val_fraction of the lines is the validation split; the vocabulary comes
 * from the training lines only.
 *
 * Cache: <cache_dir>/<name>.tokens (binary, checksummed header) and <name>.vocab (text) where
 * name is "kjv" or "text-<hash of the file contents>", plus the vocabulary options. A cache that
 * fails its checks is rebuilt.
 *
 * Batches: sequence i of the global batch at step s starts at a training position chosen by a
 * counter-based hash of (seed, s, i). Data-parallel rank r of dp takes sequences [r*B, (r+1)*B),
 * so the global batch of a step is the same whatever dp is, and no data-loader state is needed to
 * resume (the step number is enough).
 */
#ifndef ZEN_TRAIN_DATA_H
#define ZEN_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#include "tokenizer.h"

typedef struct zen_data_options {
    const char *text_path; /* NULL: the KJV Bible via `bible` */
    const char *cache_dir; /* NULL: $ZEN_DATA_DIR-like default chosen by the caller: "./data" */
    size_t vocab_max;      /* e.g. 8192 */
    uint64_t min_count;    /* e.g. 2 */
    double val_fraction;   /* e.g. 0.05 */
    int quiet;             /* 1: no progress lines on stderr */
} zen_data_options;

#define ZEN_DATA_OPTIONS_INIT        \
    {                                \
        NULL, NULL, 8192, 2, 0.05, 0 \
    }

typedef struct zen_dataset {
    zen_vocab *vocab;
    uint32_t *tokens; /* train tokens then validation tokens */
    size_t ntokens;
    size_t ntrain; /* tokens [0, ntrain) are the training split */
    size_t nlines_train, nlines_val;
    int from_cache; /* 1 when loaded from the cache */
    char name[64];  /* "kjv" or "text-..." */
} zen_dataset;

/*
 * Load or build the dataset. On failure err gets a one-line reason (e.g. "`bible` not found:
 * install bible-kjv (scripts/deps.sh) or pass --data FILE").
 */
zen_status zen_dataset_load(const zen_data_options *opts, zen_dataset **out, char *err,
                            size_t errlen);
void zen_dataset_destroy(zen_dataset *ds);

/* mkdir -p DIR (missing parents included): 0, or -1 with errno set. */
int zen_train_mkdir_p(const char *dir);

/* Build from an in-memory list of lines (no cache); used by tests and by zen_dataset_load. */
zen_status zen_dataset_from_lines(const char *const *lines, size_t nlines,
                                  const zen_data_options *opts, zen_dataset **out);

/* Strip a leading "Book C:V " reference from a bible line; returns the offset of the text. */
size_t zen_data_strip_reference(const char *line, size_t len);

/*
 * Fill x and y (count x seq each) with the input and target tokens of sequences
 * [first, first+count) of the global training batch of the given step (y is x shifted by one).
 */
void zen_data_train_batch(const zen_dataset *ds, uint64_t seed, uint64_t step, size_t first,
                          size_t count, size_t seq, int32_t *x, int32_t *y);

/*
 * Validation sequences: sequence j (0 <= j < nval) starts at an evenly spaced position of the
 * validation split, so every evaluation scores the same tokens. Fills sequences [first,
 * first+count). Returns ZEN_EINVAL when the validation split is shorter than seq+1 tokens.
 */
zen_status zen_data_val_batch(const zen_dataset *ds, size_t nval, size_t first, size_t count,
                              size_t seq, int32_t *x, int32_t *y);

/*
 * Unigram baseline: the cross-entropy (nats per token) of the validation targets under the
 * training split's token frequencies with add-one smoothing -- the loss of a model that ignores
 * context, which a trained model should beat.
 */
double zen_data_unigram_loss(const zen_dataset *ds);

#endif
