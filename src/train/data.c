/*
 * The training corpus: reading lines (file or `bible`), building and caching the token file,
 * and the counter-based batch sampler.
 */
#include "data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "errbuf.h"
#include "hash.h"

#define TOKEN_MAGIC "ZENTOK01"

typedef struct token_header {
    char magic[8];
    uint64_t vocab_max, min_count, val_permille;
    uint64_t vocab_digest;
    uint64_t ntokens, ntrain, nlines_train, nlines_val;
    uint64_t checksum;   /* of the token array */
    uint64_t header_sum; /* of the fields above */
} token_header;

size_t zen_data_strip_reference(const char *line, size_t len)
{
    /* [digit]letters digits ':' digits ' ' */
    size_t i = 0;
    if (i < len && line[i] >= '1' && line[i] <= '3')
        i++;
    size_t letters = i;
    while (i < len && ((line[i] >= 'A' && line[i] <= 'Z') || (line[i] >= 'a' && line[i] <= 'z')))
        i++;
    if (i == letters)
        return 0;
    size_t d = i;
    while (i < len && line[i] >= '0' && line[i] <= '9')
        i++;
    if (i == d || i >= len || line[i] != ':')
        return 0;
    d = ++i;
    while (i < len && line[i] >= '0' && line[i] <= '9')
        i++;
    if (i == d || i >= len || line[i] != ' ')
        return 0;
    return i + 1;
}

/* ---- reading text ---- */

typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

static zen_status read_stream(FILE *f, text_buf *t)
{
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (t->len + n + 1 > t->cap) {
            size_t ncap = t->cap ? t->cap : 1 << 20;
            while (ncap < t->len + n + 1)
                ncap *= 2;
            char *p = realloc(t->data, ncap);
            if (!p)
                return ZEN_ENOMEM;
            t->data = p;
            t->cap = ncap;
        }
        memcpy(t->data + t->len, chunk, n);
        t->len += n;
    }
    if (ferror(f))
        return ZEN_EIO;
    if (!t->data && !(t->data = malloc(1)))
        return ZEN_ENOMEM;
    t->data[t->len] = 0;
    return ZEN_OK;
}

/* Split into non-empty lines in place (newlines become NULs); strip references when asked. */
static zen_status split_lines(text_buf *t, int strip_refs, char ***lines, size_t *nlines)
{
    size_t n = 0, cap = 0;
    char **v = NULL;
    char *p = t->data, *end = t->data + t->len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        *stop = 0;
        size_t len = (size_t)(stop - p);
        if (len && p[len - 1] == '\r')
            p[--len] = 0;
        char *s = p + (strip_refs ? zen_data_strip_reference(p, len) : 0);
        int blank = 1;
        for (char *q = s; *q; q++)
            if (*q != ' ' && *q != '\t')
                blank = 0;
        if (!blank) {
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 4096;
                char **nv = zen_train_realloc_array(v, ncap, sizeof *nv);
                if (!nv) {
                    free(v);
                    return ZEN_ENOMEM;
                }
                v = nv;
                cap = ncap;
            }
            v[n++] = s;
        }
        p = stop + 1;
    }
    *lines = v;
    *nlines = n;
    return ZEN_OK;
}

/* ---- building ---- */

zen_status zen_dataset_from_lines(const char *const *lines, size_t nlines,
                                  const zen_data_options *opts, zen_dataset **out)
{
    *out = NULL;
    if (nlines < 2 || !(opts->val_fraction > 0) || !(opts->val_fraction < 1))
        return ZEN_EINVAL;
    size_t nval = (size_t)ceil((double)nlines * opts->val_fraction);
    if (nval < 1)
        nval = 1;
    if (nval >= nlines)
        nval = nlines - 1;
    size_t ntr = nlines - nval;

    zen_dataset *ds = zen_train_calloc(1, sizeof *ds);
    zen_wordcount *wc = NULL;
    zen_status st = ds ? zen_wordcount_create(&wc) : ZEN_ENOMEM;
    for (size_t i = 0; i < ntr && st == ZEN_OK; i++)
        st = zen_wordcount_add_text(wc, lines[i], strlen(lines[i]));
    if (st == ZEN_OK)
        st = zen_vocab_build(wc, opts->vocab_max, opts->min_count, &ds->vocab);
    zen_wordcount_destroy(wc);
    size_t cap = 0;
    for (size_t i = 0; i < nlines && st == ZEN_OK; i++) {
        st = zen_vocab_encode_line(ds->vocab, lines[i], strlen(lines[i]), &ds->tokens, &ds->ntokens,
                                   &cap);
        if (i + 1 == ntr)
            ds->ntrain = ds->ntokens;
    }
    if (st != ZEN_OK) {
        zen_dataset_destroy(ds);
        return st;
    }
    ds->nlines_train = ntr;
    ds->nlines_val = nval;
    snprintf(ds->name, sizeof ds->name, "lines");
    *out = ds;
    return ZEN_OK;
}

void zen_dataset_destroy(zen_dataset *ds)
{
    if (!ds)
        return;
    zen_vocab_destroy(ds->vocab);
    free(ds->tokens);
    free(ds);
}

/* ---- cache files ---- */

static uint64_t header_sum(const token_header *h)
{
    return zen_train_fnv1a(h, offsetof(token_header, header_sum), 0x746f6b68ull);
}

/* mkdir -p: every missing parent too (a fresh tree has no build/workloads for --dump-grads
 * build/workloads/gpt); 0, or -1 with errno set. */
int zen_train_mkdir_p(const char *dir)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return (mkdir(buf, 0777) != 0 && errno != EEXIST) ? -1 : 0;
}

static zen_status write_cache(const zen_dataset *ds, const zen_data_options *opts,
                              const char *tok_path, const char *vocab_path)
{
    char tmp[1100];
    token_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, TOKEN_MAGIC, 8);
    h.vocab_max = opts->vocab_max;
    h.min_count = opts->min_count;
    h.val_permille = (uint64_t)llround(opts->val_fraction * 1000.0);
    h.vocab_digest = zen_vocab_digest(ds->vocab);
    h.ntokens = ds->ntokens;
    h.ntrain = ds->ntrain;
    h.nlines_train = ds->nlines_train;
    h.nlines_val = ds->nlines_val;
    h.checksum = zen_train_fnv1a(ds->tokens, ds->ntokens * sizeof *ds->tokens, 0);
    h.header_sum = header_sum(&h);

    /* vocabulary first, token file last: the token file names the vocabulary digest, so a crash
     * between the two leaves a cache that fails its check and is rebuilt */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", vocab_path, (long)getpid());
    zen_status st = zen_vocab_save(ds->vocab, tmp);
    if (st != ZEN_OK || rename(tmp, vocab_path) != 0) {
        unlink(tmp);
        return ZEN_EIO;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", tok_path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return ZEN_EIO;
    int bad = fwrite(&h, sizeof h, 1, f) != 1;
    bad |= fwrite(ds->tokens, sizeof *ds->tokens, ds->ntokens, f) != ds->ntokens;
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, tok_path) != 0) {
        unlink(tmp);
        return ZEN_EIO;
    }
    return ZEN_OK;
}

/* Returns ZEN_OK with *out filled, or an error meaning "rebuild". */
static zen_status read_cache(const zen_data_options *opts, const char *tok_path,
                             const char *vocab_path, zen_dataset **out)
{
    *out = NULL;
    FILE *f = NULL;
    char why[512];
    if (zen_file_open_input(tok_path, UINT64_MAX, &f, NULL, why, sizeof why) != ZEN_OK)
        return ZEN_EIO;
    token_header h;
    zen_dataset *ds = NULL;
    zen_status st = ZEN_ECORRUPT;
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, TOKEN_MAGIC, 8) != 0 ||
        h.header_sum != header_sum(&h) || h.vocab_max != opts->vocab_max ||
        h.min_count != opts->min_count ||
        h.val_permille != (uint64_t)llround(opts->val_fraction * 1000.0) || h.ntrain > h.ntokens ||
        h.ntokens > ((uint64_t)1 << 34))
        goto out;
    ds = zen_train_calloc(1, sizeof *ds);
    if (!ds ||
        !(ds->tokens = zen_train_malloc_array(h.ntokens ? h.ntokens : 1, sizeof(uint32_t)))) {
        st = ZEN_ENOMEM;
        goto out;
    }
    if (fread(ds->tokens, sizeof(uint32_t), h.ntokens, f) != h.ntokens ||
        zen_train_fnv1a(ds->tokens, h.ntokens * sizeof(uint32_t), 0) != h.checksum)
        goto out;
    st = zen_vocab_load(vocab_path, &ds->vocab);
    if (st != ZEN_OK)
        goto out;
    st = ZEN_ECORRUPT;
    if (zen_vocab_digest(ds->vocab) != h.vocab_digest)
        goto out;
    for (uint64_t i = 0; i < h.ntokens; i++)
        if (ds->tokens[i] >= zen_vocab_size(ds->vocab))
            goto out;
    ds->ntokens = h.ntokens;
    ds->ntrain = h.ntrain;
    ds->nlines_train = h.nlines_train;
    ds->nlines_val = h.nlines_val;
    ds->from_cache = 1;
    *out = ds;
    ds = NULL;
    st = ZEN_OK;
out:
    fclose(f);
    zen_dataset_destroy(ds);
    return st;
}

/* A gzip (or dictzip, which is gzip with an index: dict-gcide's *.dict.dz) file, through
 * `gzip -dc`, so the library needs no zlib. The path is single-quoted for the shell. */
static int is_gzip_path(const char *p)
{
    size_t n = strlen(p);
    return (n > 3 && strcmp(p + n - 3, ".gz") == 0) || (n > 3 && strcmp(p + n - 3, ".dz") == 0);
}

static zen_status read_gzip(const char *path, text_buf *t, char *err, size_t errlen)
{
    char cmd[1200];
    if (strchr(path, '\'') ||
        snprintf(cmd, sizeof cmd, "gzip -dc -- '%s' 2>/dev/null", path) >= (int)sizeof cmd) {
        zen_train_set_err(err, errlen, "cannot decompress %s: quote in or too long a path", path);
        return ZEN_EINVAL;
    }
    FILE *f = popen(cmd, "r");
    if (!f) {
        zen_train_set_err(err, errlen, "cannot run gzip: %s", strerror(errno));
        return ZEN_ESYS;
    }
    zen_status st = read_stream(f, t);
    int ws = pclose(f);
    if (st == ZEN_OK && (ws == -1 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)) {
        zen_train_set_err(err, errlen, "`gzip -dc %s` failed: missing or not gzip data", path);
        st = ZEN_EIO;
    }
    return st;
}

/*
 * Opens a --data file for reading. Its text, lines and tokens take about 3 times the file, so it
 * may hold at most a quarter of this machine's memory; and it must be a regular file, since a
 * device (`--data /dev/zero`) would be read until memory runs out and a FIFO would never open.
 */
static FILE *open_corpus(const char *path, char *err, size_t errlen)
{
    long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    uint64_t limit =
        pages > 0 && page_bytes > 0 ? (uint64_t)pages * (uint64_t)page_bytes / 4 : UINT64_MAX;
    FILE *f = NULL;
    char why[512];
    zen_status st = zen_file_open_input(path, limit, &f, NULL, why, sizeof why);
    if (st == ZEN_OK)
        return f;
    if (errno == EFBIG)
        zen_train_set_err(err, errlen, "--data: %s (a quarter of this machine's memory)", why);
    else
        zen_train_set_err(err, errlen, "--data: %s", why);
    return NULL;
}

static zen_status read_source(const zen_data_options *opts, text_buf *t, char *err, size_t errlen)
{
    FILE *f;
    zen_status st;
    if (opts->text_path && is_gzip_path(opts->text_path))
        return read_gzip(opts->text_path, t, err, errlen);
    if (opts->text_path) {
        if (!(f = open_corpus(opts->text_path, err, errlen)))
            return ZEN_EIO;
        st = read_stream(f, t);
        fclose(f);
        if (st != ZEN_OK)
            zen_train_set_err(err, errlen, "reading %s failed", opts->text_path);
        return st;
    }
    f = popen("bible -f 'Gen1:1-Rev22:21' 2>/dev/null", "r");
    if (!f) {
        zen_train_set_err(err, errlen, "cannot run `bible`: %s", strerror(errno));
        return ZEN_ESYS;
    }
    st = read_stream(f, t);
    int ws = pclose(f);
    int rc = ws == -1 ? -1 : (WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
    if (st == ZEN_OK && (rc != 0 || t->len < 1000)) {
        zen_train_set_err(err, errlen,
                          "`bible -f Gen1:1-Rev22:21` failed (exit %d): install bible-kjv "
                          "(scripts/deps.sh) or pass --data FILE",
                          rc);
        st = ZEN_EUNSUPPORTED;
    }
    return st;
}

zen_status zen_dataset_load(const zen_data_options *opts, zen_dataset **out, char *err,
                            size_t errlen)
{
    *out = NULL;
    text_buf t = { NULL, 0, 0 };
    char base[64], tok_path[1024], vocab_path[1024];
    const char *dir = opts->cache_dir ? opts->cache_dir : "data";
    zen_status st = ZEN_OK;

    /* a text file is named by its contents, so an edited file gets a fresh cache */
    if (opts->text_path) {
        st = read_source(opts, &t, err, errlen);
        if (st != ZEN_OK)
            goto done;
        snprintf(base, sizeof base, "text-%016llx",
                 (unsigned long long)zen_train_fnv1a(t.data, t.len, 0x74657874ull));
    } else {
        snprintf(base, sizeof base, "kjv");
    }
    int n1 = snprintf(tok_path, sizeof tok_path, "%s/%s-v%zu-m%llu-p%d.tokens", dir, base,
                      opts->vocab_max, (unsigned long long)opts->min_count,
                      (int)llround(opts->val_fraction * 1000.0));
    int n2 = snprintf(vocab_path, sizeof vocab_path, "%.*s.vocab", n1 - 7, tok_path);
    if (n1 >= (int)sizeof tok_path || n2 >= (int)sizeof vocab_path) {
        zen_train_set_err(err, errlen, "cache path too long: %s", dir);
        st = ZEN_EINVAL;
        goto done;
    }
    if (read_cache(opts, tok_path, vocab_path, out) == ZEN_OK) {
        snprintf((*out)->name, sizeof(*out)->name, "%s", base);
        goto done;
    }
    if (!opts->text_path) {
        st = read_source(opts, &t, err, errlen);
        if (st != ZEN_OK)
            goto done;
    }
    if (!opts->quiet)
        fprintf(stderr, "zen train: tokenizing %s (%zu bytes), caching in %s/\n",
                opts->text_path ? opts->text_path : "the KJV Bible", t.len, dir);
    char **lines = NULL;
    size_t nlines = 0;
    st = split_lines(&t, opts->text_path == NULL, &lines, &nlines);
    if (st == ZEN_OK) {
        st = zen_dataset_from_lines((const char *const *)lines, nlines, opts, out);
        if (st == ZEN_EINVAL)
            zen_train_set_err(err, errlen, "the text has %zu non-empty lines; need at least 2",
                              nlines);
        else if (st != ZEN_OK)
            zen_train_set_err(err, errlen, "tokenizing failed: %s", zen_strerror(st));
    }
    free(lines);
    if (st != ZEN_OK)
        goto done;
    snprintf((*out)->name, sizeof(*out)->name, "%s", base);
    /* a failing cache write only costs time on the next run */
    if (zen_train_mkdir_p(dir) != 0 || write_cache(*out, opts, tok_path, vocab_path) != ZEN_OK) {
        if (!opts->quiet)
            fprintf(stderr, "zen train: warning: cannot write the token cache in %s/\n", dir);
    }
done:
    free(t.data);
    return st;
}

/* ---- batches ---- */

void zen_data_train_batch(const zen_dataset *ds, uint64_t seed, uint64_t step, size_t first,
                          size_t count, size_t seq, int32_t *x, int32_t *y)
{
    uint64_t span = ds->ntrain > seq + 1 ? ds->ntrain - seq - 1 : 1;
    for (size_t i = 0; i < count; i++) {
        uint64_t h =
            zen_train_hash64(zen_train_hash64(step, seed) ^ (first + i), seed ^ 0x6261746368ull);
        size_t pos = (size_t)(h % span);
        for (size_t t = 0; t < seq; t++) {
            size_t a = pos + t < ds->ntrain ? pos + t : ds->ntrain - 1;
            size_t b = pos + t + 1 < ds->ntrain ? pos + t + 1 : ds->ntrain - 1;
            x[i * seq + t] = (int32_t)ds->tokens[a];
            y[i * seq + t] = (int32_t)ds->tokens[b];
        }
    }
}

zen_status zen_data_val_batch(const zen_dataset *ds, size_t nval, size_t first, size_t count,
                              size_t seq, int32_t *x, int32_t *y)
{
    size_t nv = ds->ntokens - ds->ntrain;
    if (nv < seq + 1 || nval == 0 || first + count > nval)
        return ZEN_EINVAL;
    size_t span = nv - seq - 1;
    for (size_t i = 0; i < count; i++) {
        size_t j = first + i;
        size_t pos =
            ds->ntrain + (nval > 1 ? (size_t)((double)span * (double)j / (double)(nval - 1)) : 0);
        for (size_t t = 0; t < seq; t++) {
            x[i * seq + t] = (int32_t)ds->tokens[pos + t];
            y[i * seq + t] = (int32_t)ds->tokens[pos + t + 1];
        }
    }
    return ZEN_OK;
}

double zen_data_unigram_loss(const zen_dataset *ds)
{
    size_t v = zen_vocab_size(ds->vocab);
    uint64_t *cnt = zen_train_calloc(v, sizeof *cnt);
    if (!cnt || ds->ntokens == ds->ntrain) {
        free(cnt);
        return NAN;
    }
    for (size_t i = 0; i < ds->ntrain; i++)
        cnt[ds->tokens[i]]++;
    double total = (double)ds->ntrain + (double)v, loss = 0;
    for (size_t i = ds->ntrain; i < ds->ntokens; i++)
        loss -= log(((double)cnt[ds->tokens[i]] + 1.0) / total);
    free(cnt);
    return loss / (double)(ds->ntokens - ds->ntrain);
}
