/*
 * tokenizer.h - word-level tokenizer of the trainer.
 *
 * A text is cut into tokens as follows: a word is a maximal run of ASCII letters and digits, bytes
 * >= 0x80 (so any UTF-8 letter stays inside its word) and apostrophes that sit between two such
 * characters ("lord's" is one word); ASCII letters are lower-cased. Every other non-space byte is
 * a one-character punctuation token. Whitespace separates tokens and is dropped.
 *
 * The vocabulary maps words to ids: id 0 is the unknown token "<unk>", id 1 the end-of-line
 * (end-of-verse) token "<eos>", then the words of the training text by decreasing count (ties by
 * byte order, so the vocabulary is a pure function of the text), keeping at most max_size ids in
 * all and only words seen at least min_count times.
 */
#ifndef ZEN_TRAIN_TOKENIZER_H
#define ZEN_TRAIN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#define ZEN_TOK_UNK      0u
#define ZEN_TOK_EOS      1u
#define ZEN_TOK_MAX_WORD 64 /* longer words are cut (the rest becomes further tokens) */

/* Called for each token of a line: tok is lower-cased and NUL-terminated. Nonzero stops. */
typedef int (*zen_tok_fn)(const char *tok, size_t len, void *user);

/* Cut text[0..len) into tokens; returns the number of tokens visited. */
size_t zen_tok_split(const char *text, size_t len, zen_tok_fn fn, void *user);

/* A string -> count table used to build the vocabulary. */
typedef struct zen_wordcount zen_wordcount;

zen_status zen_wordcount_create(zen_wordcount **out);
void zen_wordcount_destroy(zen_wordcount *wc);
/* Count every token of the text. */
zen_status zen_wordcount_add_text(zen_wordcount *wc, const char *text, size_t len);
size_t zen_wordcount_distinct(const zen_wordcount *wc);

typedef struct zen_vocab zen_vocab;

/* Build a vocabulary from counts (see the file comment). max_size >= 3. */
zen_status zen_vocab_build(const zen_wordcount *wc, size_t max_size, uint64_t min_count,
                           zen_vocab **out);
void zen_vocab_destroy(zen_vocab *v);
size_t zen_vocab_size(const zen_vocab *v);
/* The word of an id ("<unk>" for an out-of-range id). */
const char *zen_vocab_word(const zen_vocab *v, uint32_t id);
/* The id of a (lower-cased) token, ZEN_TOK_UNK when absent. */
uint32_t zen_vocab_lookup(const zen_vocab *v, const char *tok, size_t len);

/*
 * Encode a line: its tokens then ZEN_TOK_EOS are appended to *ids (a growing array with *count
 * used and *cap allocated entries, grown with realloc as needed).
 */
zen_status zen_vocab_encode_line(const zen_vocab *v, const char *line, size_t len, uint32_t **ids,
                                 size_t *count, size_t *cap);

/*
 * Render ids as text into out (always NUL-terminated): words separated by spaces, no space before
 * punctuation, "<eos>" as a newline. Returns the length written.
 */
size_t zen_vocab_decode(const zen_vocab *v, const uint32_t *ids, size_t n, char *out, size_t cap);

/* Save as text, one word per line in id order; load the same. ZEN_EIO / ZEN_ECORRUPT on failure. */
zen_status zen_vocab_save(const zen_vocab *v, const char *path);
zen_status zen_vocab_load(const char *path, zen_vocab **out);

/* A 64-bit digest of the vocabulary (its words in order), stored in token files. */
uint64_t zen_vocab_digest(const zen_vocab *v);

#endif
