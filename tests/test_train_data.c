/* Tokenizer, vocabulary, dataset split, token cache and batch sampler of the trainer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "train/data.h"
#include "train/tokenizer.h"

typedef struct tok_list {
    char toks[64][ZEN_TOK_MAX_WORD + 1];
    int n;
} tok_list;

static int collect(const char *tok, size_t len, void *user)
{
    tok_list *l = user;
    assert_int_equal(strlen(tok), len);
    if (l->n < 64)
        snprintf(l->toks[l->n++], sizeof l->toks[0], "%s", tok);
    return 0;
}

static void test_split_rules(void **state)
{
    (void)state;
    const char *text = "In the LORD's house, (verily)!  don' t\tcaf\xc3\xa9 x'";
    const char *want[] = { "in", "the", "lord's", "house", ",",           "(", "verily", ")",
                           "!",  "don", "'",      "t",     "caf\xc3\xa9", "x", "'" };
    tok_list l;
    memset(&l, 0, sizeof l);
    size_t n = zen_tok_split(text, strlen(text), collect, &l);
    assert_int_equal(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(l.toks[i], want[i]);
}

static void test_strip_reference(void **state)
{
    (void)state;
    assert_int_equal(zen_data_strip_reference("Ge1:1 In the", 12), 6);
    assert_int_equal(zen_data_strip_reference("1Sm3:10 And", 11), 8);
    assert_int_equal(zen_data_strip_reference("Rev22:21 The", 12), 9);
    assert_int_equal(zen_data_strip_reference("Hello world", 11), 0);
    assert_int_equal(zen_data_strip_reference("Ge1: x", 6), 0);
    assert_int_equal(zen_data_strip_reference("Ge1:1", 5), 0);
}

/* A small corpus: sentences from a fixed grammar, so word frequencies are uneven. */
static char **make_lines(size_t n, uint64_t seed)
{
    static const char *subj[] = { "the cat", "a dog", "my LORD", "the king's son", "Moses" };
    static const char *verb[] = { "saw", "ate", "blessed", "went unto", "spake to" };
    static const char *obj[] = { "the mat", "bread", "the people", "Egypt", "a fish" };
    static const char *end[] = { ".", "!", "?", ", and rested.", ": so it was." };
    char **lines = calloc(n, sizeof *lines);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s %s %s%s", subj[zt_rand(&s) % 5], verb[zt_rand(&s) % 5],
                 obj[zt_rand(&s) % 5], end[zt_rand(&s) % 5]);
        lines[i] = strdup(buf);
    }
    return lines;
}

static void free_lines(char **lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

/* Naive reference count of one word over lines [0, n). */
static uint64_t naive_count(char **lines, size_t n, const char *word)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++) {
        tok_list l;
        memset(&l, 0, sizeof l);
        zen_tok_split(lines[i], strlen(lines[i]), collect, &l);
        for (int k = 0; k < l.n; k++)
            c += strcmp(l.toks[k], word) == 0;
    }
    return c;
}

static void test_vocab_order_and_limits(void **state)
{
    (void)state;
    size_t n = 300;
    char **lines = make_lines(n, 7);
    zen_wordcount *wc;
    assert_int_equal(zen_wordcount_create(&wc), ZEN_OK);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(zen_wordcount_add_text(wc, lines[i], strlen(lines[i])), ZEN_OK);
    zen_vocab *v;
    assert_int_equal(zen_vocab_build(wc, 1000, 1, &v), ZEN_OK);
    assert_string_equal(zen_vocab_word(v, ZEN_TOK_UNK), "<unk>");
    assert_string_equal(zen_vocab_word(v, ZEN_TOK_EOS), "<eos>");
    assert_int_equal(zen_vocab_size(v), zen_wordcount_distinct(wc) + 2);
    /* counts are non-increasing along the ids and match a naive count */
    uint64_t prev = UINT64_MAX;
    for (uint32_t id = 2; id < zen_vocab_size(v); id++) {
        const char *w = zen_vocab_word(v, id);
        uint64_t c = naive_count(lines, n, w);
        assert_true(c >= 1);
        assert_true(c <= prev);
        prev = c;
        assert_int_equal(zen_vocab_lookup(v, w, strlen(w)), id);
    }
    assert_int_equal(zen_vocab_lookup(v, "zebra", 5), ZEN_TOK_UNK);
    /* max_size keeps the most frequent words */
    zen_vocab *small;
    assert_int_equal(zen_vocab_build(wc, 6, 1, &small), ZEN_OK);
    assert_int_equal(zen_vocab_size(small), 6);
    for (uint32_t id = 2; id < 6; id++)
        assert_string_equal(zen_vocab_word(small, id), zen_vocab_word(v, id));
    /* min_count drops rare words */
    zen_vocab *common;
    uint64_t minc = naive_count(lines, n, zen_vocab_word(v, 10));
    assert_int_equal(zen_vocab_build(wc, 1000, minc, &common), ZEN_OK);
    for (uint32_t id = 2; id < zen_vocab_size(common); id++) {
        const char *w = zen_vocab_word(common, id);
        assert_true(naive_count(lines, n, w) >= minc);
    }
    assert_true(zen_vocab_size(common) < zen_vocab_size(v));
    zen_vocab_destroy(common);
    zen_vocab_destroy(small);

    /* save/load round trip */
    char path[] = "/tmp/zen_vocab_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(zen_vocab_save(v, path), ZEN_OK);
    zen_vocab *back;
    assert_int_equal(zen_vocab_load(path, &back), ZEN_OK);
    assert_int_equal(zen_vocab_size(back), zen_vocab_size(v));
    assert_true(zen_vocab_digest(back) == zen_vocab_digest(v));
    for (uint32_t id = 0; id < zen_vocab_size(v); id++)
        assert_string_equal(zen_vocab_word(back, id), zen_vocab_word(v, id));
    /* a file without the special words is refused */
    FILE *f = fopen(path, "w");
    fputs("hello\nworld\n", f);
    fclose(f);
    zen_vocab *bad = NULL;
    assert_int_equal(zen_vocab_load(path, &bad), ZEN_ECORRUPT);
    assert_null(bad);
    unlink(path);

    /* encode + decode gives the lower-cased text back with canonical spacing */
    const char *line = "Moses saw the mat, and rested.";
    uint32_t *ids = NULL;
    size_t cnt = 0, cap = 0;
    assert_int_equal(zen_vocab_encode_line(back, line, strlen(line), &ids, &cnt, &cap), ZEN_OK);
    assert_int_equal(ids[cnt - 1], ZEN_TOK_EOS);
    char text[256];
    zen_vocab_decode(back, ids, cnt, text, sizeof text);
    assert_string_equal(text, "moses saw the mat, and rested.\n");
    free(ids);
    zen_vocab_destroy(back);
    zen_vocab_destroy(v);
    zen_wordcount_destroy(wc);
    free_lines(lines, n);
}

static void test_dataset_split(void **state)
{
    (void)state;
    size_t n = 200;
    char **lines = make_lines(n, 11);
    free(lines[n - 1]);
    lines[n - 1] = strdup("zyzzyva only here");
    zen_data_options o = ZEN_DATA_OPTIONS_INIT;
    o.min_count = 1;
    zen_dataset *ds;
    assert_int_equal(zen_dataset_from_lines((const char *const *)lines, n, &o, &ds), ZEN_OK);
    assert_int_equal(ds->nlines_val, 10); /* 5% of 200 */
    assert_int_equal(ds->nlines_train, 190);
    /* token counts: each line's tokens plus its <eos> */
    size_t want_train = 0, want_all = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = zen_tok_split(lines[i], strlen(lines[i]), NULL, NULL) + 1;
        want_all += k;
        if (i < 190)
            want_train += k;
    }
    assert_int_equal(ds->ntrain, want_train);
    assert_int_equal(ds->ntokens, want_all);
    /* a word seen only in validation is unknown */
    assert_int_equal(zen_vocab_lookup(ds->vocab, "zyzzyva", 7), ZEN_TOK_UNK);
    assert_int_equal(ds->tokens[ds->ntokens - 4], ZEN_TOK_UNK);
    assert_int_equal(ds->tokens[ds->ntokens - 1], ZEN_TOK_EOS);

    /* unigram baseline against a direct computation */
    size_t V = zen_vocab_size(ds->vocab);
    double *cnt = calloc(V, sizeof *cnt), ref = 0;
    for (size_t i = 0; i < ds->ntrain; i++)
        cnt[ds->tokens[i]] += 1;
    for (size_t i = ds->ntrain; i < ds->ntokens; i++)
        ref += -log((cnt[ds->tokens[i]] + 1) / ((double)ds->ntrain + (double)V));
    ref /= (double)(ds->ntokens - ds->ntrain);
    assert_true(fabs(zen_data_unigram_loss(ds) - ref) < 1e-9);
    free(cnt);

    /* batches: y is x shifted by one, both contiguous slices of the training split; the global
     * batch is the same whether taken whole or in per-rank parts */
    size_t seq = 6, B = 4;
    int32_t x[24], y[24], x2[24], y2[24];
    zen_data_train_batch(ds, 5, 3, 0, B, seq, x, y);
    zen_data_train_batch(ds, 5, 3, 0, 1, seq, x2, y2);
    zen_data_train_batch(ds, 5, 3, 1, 3, seq, x2 + seq, y2 + seq);
    assert_memory_equal(x, x2, sizeof x);
    assert_memory_equal(y, y2, sizeof y);
    for (size_t b = 0; b < B; b++) {
        for (size_t t = 0; t + 1 < seq; t++)
            assert_int_equal(y[b * seq + t], x[b * seq + t + 1]);
        int found = 0;
        for (size_t p = 0; p + seq < ds->ntrain && !found; p++) {
            int same = 1;
            for (size_t t = 0; t < seq && same; t++)
                same = (uint32_t)x[b * seq + t] == ds->tokens[p + t] &&
                       (uint32_t)y[b * seq + t] == ds->tokens[p + t + 1];
            found = same;
        }
        assert_true(found);
    }
    /* another step draws other positions */
    zen_data_train_batch(ds, 5, 4, 0, B, seq, x2, y2);
    assert_true(memcmp(x, x2, sizeof x) != 0);

    /* validation sequences come from the validation split */
    assert_int_equal(zen_data_val_batch(ds, 4, 0, 4, seq, x, y), ZEN_OK);
    for (size_t t = 0; t < seq; t++)
        assert_int_equal((uint32_t)x[t], ds->tokens[ds->ntrain + t]);
    assert_int_equal(zen_data_val_batch(ds, 4, 2, 3, seq, x, y), ZEN_EINVAL);
    zen_dataset_destroy(ds);
    free_lines(lines, n);
}

static void test_cache_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen_cache_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char text[512];
    snprintf(text, sizeof text, "%s/corpus.txt", dir);
    size_t n = 100;
    char **lines = make_lines(n, 3);
    FILE *f = fopen(text, "w");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n\n", lines[i]); /* blank lines are skipped */
    fclose(f);

    zen_data_options o = ZEN_DATA_OPTIONS_INIT;
    o.text_path = text;
    o.cache_dir = dir;
    o.min_count = 1;
    o.quiet = 1;
    char err[256] = "";
    zen_dataset *a, *b, *ref;
    assert_int_equal(zen_dataset_load(&o, &a, err, sizeof err), ZEN_OK);
    assert_int_equal(a->from_cache, 0);
    assert_int_equal(zen_dataset_from_lines((const char *const *)lines, n, &o, &ref), ZEN_OK);
    assert_int_equal(a->ntokens, ref->ntokens);
    assert_memory_equal(a->tokens, ref->tokens, a->ntokens * sizeof *a->tokens);
    assert_int_equal(zen_dataset_load(&o, &b, err, sizeof err), ZEN_OK);
    assert_int_equal(b->from_cache, 1);
    assert_int_equal(b->ntokens, a->ntokens);
    assert_int_equal(b->ntrain, a->ntrain);
    assert_memory_equal(b->tokens, a->tokens, a->ntokens * sizeof *a->tokens);
    assert_true(zen_vocab_digest(b->vocab) == zen_vocab_digest(a->vocab));
    zen_dataset_destroy(b);

    /* flip a byte of the cached tokens: the cache is rejected and rebuilt identically */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s/*.tokens", dir);
    FILE *p = popen(cmd, "r");
    char tok[512] = "";
    assert_non_null(fgets(tok, sizeof tok, p));
    pclose(p);
    tok[strcspn(tok, "\n")] = 0;
    f = fopen(tok, "r+b");
    fseek(f, -3, SEEK_END);
    int c = fgetc(f);
    fseek(f, -3, SEEK_END);
    fputc(c ^ 0x5a, f);
    fclose(f);
    assert_int_equal(zen_dataset_load(&o, &b, err, sizeof err), ZEN_OK);
    assert_int_equal(b->from_cache, 0);
    assert_memory_equal(b->tokens, a->tokens, a->ntokens * sizeof *a->tokens);
    zen_dataset_destroy(b);

    /* a gzip-compressed copy (read through `gzip -dc`) gives the same tokens, tokenized afresh
     * in another cache directory; a missing .gz is a clear error too */
    char gz[600], gzcache[600];
    snprintf(cmd, sizeof cmd, "gzip -c %s > %s/corpus.txt.gz", text, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(gz, sizeof gz, "%s/corpus.txt.gz", dir);
    snprintf(gzcache, sizeof gzcache, "%s/gz", dir);
    o.text_path = gz;
    o.cache_dir = gzcache;
    assert_int_equal(zen_dataset_load(&o, &b, err, sizeof err), ZEN_OK);
    assert_int_equal(b->from_cache, 0);
    assert_int_equal(b->ntokens, a->ntokens);
    assert_memory_equal(b->tokens, a->tokens, a->ntokens * sizeof *a->tokens);
    zen_dataset_destroy(b);
    o.text_path = "/nonexistent/zen.txt.gz";
    assert_int_equal(zen_dataset_load(&o, &b, err, sizeof err), ZEN_EIO);
    assert_non_null(strstr(err, "/nonexistent/zen.txt.gz"));
    o.cache_dir = dir;

    /* a missing file is a clear error */
    o.text_path = "/nonexistent/zen.txt";
    assert_int_equal(zen_dataset_load(&o, &b, err, sizeof err), ZEN_EIO);
    assert_non_null(strstr(err, "/nonexistent/zen.txt"));

    zen_dataset_destroy(a);
    zen_dataset_destroy(ref);
    free_lines(lines, n);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_rules),
        cmocka_unit_test(test_strip_reference),
        cmocka_unit_test(test_vocab_order_and_limits),
        cmocka_unit_test(test_dataset_split),
        cmocka_unit_test(test_cache_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
