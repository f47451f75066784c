/*
 * Word-level tokenizer: splitting, counting, vocabulary, encode/decode, save/load.
 *
 * Both the word counter and the vocabulary use one open-addressing string table (linear probing,
 * power-of-two size kept at most half full, FNV-1a hashes), so lookups while encoding a 4 MB
 * corpus cost one hash and usually one string compare per token.
 */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hash.h"

/* ---- splitting ---- */

static int is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static int is_space_byte(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

size_t zen_tok_split(const char *text, size_t len, zen_tok_fn fn, void *user)
{
    char buf[ZEN_TOK_MAX_WORD + 1];
    size_t i = 0, ntok = 0;
    while (i < len) {
        unsigned char c = (unsigned char)text[i];
        if (is_space_byte(c) || c == 0) {
            i++;
            continue;
        }
        size_t n = 0;
        if (is_word_byte(c)) {
            /* a word: word bytes, plus apostrophes with a word byte on both sides */
            while (i < len && n < ZEN_TOK_MAX_WORD) {
                unsigned char d = (unsigned char)text[i];
                if (is_word_byte(d)) {
                    buf[n++] = (d >= 'A' && d <= 'Z') ? (char)(d - 'A' + 'a') : (char)d;
                    i++;
                } else if (d == '\'' && n > 0 && i + 1 < len &&
                           is_word_byte((unsigned char)text[i + 1])) {
                    buf[n++] = '\'';
                    i++;
                } else {
                    break;
                }
            }
        } else {
            buf[n++] = (char)c;
            i++;
        }
        buf[n] = 0;
        ntok++;
        if (fn && fn(buf, n, user))
            break;
    }
    return ntok;
}

/* ---- string table ---- */

typedef struct strtab_entry {
    char *word; /* NULL: empty slot */
    uint64_t count;
    uint32_t id;
} strtab_entry;

typedef struct strtab {
    strtab_entry *slots;
    size_t nslots; /* power of two */
    size_t used;
} strtab;

static uint64_t word_hash(const char *w, size_t len)
{
    return zen_train_fnv1a(w, len, 0x7a656e746f6bull);
}

static zen_status strtab_init(strtab *t, size_t min_slots)
{
    size_t n = 64;
    while (n < 2 * min_slots)
        n *= 2;
    t->slots = zen_train_calloc(n, sizeof *t->slots);
    if (!t->slots)
        return ZEN_ENOMEM;
    t->nslots = n;
    t->used = 0;
    return ZEN_OK;
}

static void strtab_free(strtab *t)
{
    if (!t->slots)
        return;
    for (size_t i = 0; i < t->nslots; i++)
        free(t->slots[i].word);
    free(t->slots);
    t->slots = NULL;
}

static strtab_entry *strtab_find(const strtab *t, const char *w, size_t len)
{
    size_t mask = t->nslots - 1;
    for (size_t i = (size_t)word_hash(w, len) & mask;; i = (i + 1) & mask) {
        strtab_entry *e = &t->slots[i];
        if (!e->word || (strlen(e->word) == len && memcmp(e->word, w, len) == 0))
            return e;
    }
}

static zen_status strtab_grow(strtab *t)
{
    strtab old = *t;
    zen_status st = strtab_init(t, old.nslots);
    if (st != ZEN_OK) {
        *t = old;
        return st;
    }
    for (size_t i = 0; i < old.nslots; i++) {
        if (!old.slots[i].word)
            continue;
        *strtab_find(t, old.slots[i].word, strlen(old.slots[i].word)) = old.slots[i];
        t->used++;
    }
    free(old.slots);
    return ZEN_OK;
}

/* Find or insert w; *out points at its entry. */
static zen_status strtab_upsert(strtab *t, const char *w, size_t len, strtab_entry **out)
{
    if (2 * (t->used + 1) > t->nslots) {
        zen_status st = strtab_grow(t);
        if (st != ZEN_OK)
            return st;
    }
    strtab_entry *e = strtab_find(t, w, len);
    if (!e->word) {
        e->word = malloc(len + 1);
        if (!e->word)
            return ZEN_ENOMEM;
        memcpy(e->word, w, len);
        e->word[len] = 0;
        e->count = 0;
        e->id = 0;
        t->used++;
    }
    *out = e;
    return ZEN_OK;
}

/* ---- word counts ---- */

struct zen_wordcount {
    strtab tab;
};

zen_status zen_wordcount_create(zen_wordcount **out)
{
    *out = NULL;
    zen_wordcount *wc = zen_train_calloc(1, sizeof *wc);
    if (!wc)
        return ZEN_ENOMEM;
    if (strtab_init(&wc->tab, 1024) != ZEN_OK) {
        free(wc);
        return ZEN_ENOMEM;
    }
    *out = wc;
    return ZEN_OK;
}

void zen_wordcount_destroy(zen_wordcount *wc)
{
    if (!wc)
        return;
    strtab_free(&wc->tab);
    free(wc);
}

typedef struct count_ctx {
    zen_wordcount *wc;
    zen_status st;
} count_ctx;

static int count_one(const char *tok, size_t len, void *user)
{
    count_ctx *c = user;
    strtab_entry *e;
    c->st = strtab_upsert(&c->wc->tab, tok, len, &e);
    if (c->st != ZEN_OK)
        return 1;
    e->count++;
    return 0;
}

zen_status zen_wordcount_add_text(zen_wordcount *wc, const char *text, size_t len)
{
    count_ctx c = { wc, ZEN_OK };
    zen_tok_split(text, len, count_one, &c);
    return c.st;
}

size_t zen_wordcount_distinct(const zen_wordcount *wc)
{
    return wc->tab.used;
}

/* ---- vocabulary ---- */

struct zen_vocab {
    char **words; /* id -> word */
    size_t size;
    strtab tab; /* word -> id */
};

static const char *const special_words[2] = { "<unk>", "<eos>" };

static int by_count_then_bytes(const void *a, const void *b)
{
    const strtab_entry *x = *(const strtab_entry *const *)a;
    const strtab_entry *y = *(const strtab_entry *const *)b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->word, y->word);
}

/* Make a vocabulary from an ordered word list (ids 0 and 1 must be the special words). */
static zen_status vocab_from_words(char **words, size_t n, zen_vocab **out)
{
    zen_vocab *v = zen_train_calloc(1, sizeof *v);
    if (!v)
        return ZEN_ENOMEM;
    v->words = words;
    v->size = n;
    if (strtab_init(&v->tab, n) != ZEN_OK) {
        free(v);
        return ZEN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        strtab_entry *e;
        zen_status st = strtab_upsert(&v->tab, words[i], strlen(words[i]), &e);
        if (st != ZEN_OK) {
            v->words = NULL;
            v->size = 0;
            zen_vocab_destroy(v);
            return st;
        }
        if (e->count) { /* duplicate word: a corrupt file */
            v->words = NULL;
            v->size = 0;
            zen_vocab_destroy(v);
            return ZEN_ECORRUPT;
        }
        e->count = 1;
        e->id = (uint32_t)i;
    }
    *out = v;
    return ZEN_OK;
}

static void free_words(char **words, size_t n)
{
    if (!words)
        return;
    for (size_t i = 0; i < n; i++)
        free(words[i]);
    free(words);
}

zen_status zen_vocab_build(const zen_wordcount *wc, size_t max_size, uint64_t min_count,
                           zen_vocab **out)
{
    *out = NULL;
    if (max_size < 3 || max_size > UINT32_MAX)
        return ZEN_EINVAL;
    size_t n = wc->tab.used;
    const strtab_entry **sorted = zen_train_malloc_array(n ? n : 1, sizeof *sorted);
    if (!sorted)
        return ZEN_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < wc->tab.nslots; i++)
        if (wc->tab.slots[i].word && wc->tab.slots[i].count >= min_count)
            sorted[k++] = &wc->tab.slots[i];
    qsort(sorted, k, sizeof *sorted, by_count_then_bytes);
    size_t keep = 2;
    char **words = zen_train_calloc(max_size, sizeof *words);
    zen_status st = words ? ZEN_OK : ZEN_ENOMEM;
    for (size_t i = 0; i < 2 && st == ZEN_OK; i++)
        if (!(words[i] = strdup(special_words[i])))
            st = ZEN_ENOMEM;
    for (size_t i = 0; i < k && keep < max_size && st == ZEN_OK; i++) {
        if (strcmp(sorted[i]->word, "<unk>") == 0 || strcmp(sorted[i]->word, "<eos>") == 0)
            continue; /* cannot occur with zen_tok_split, but keep ids unique anyway */
        if (!(words[keep++] = strdup(sorted[i]->word)))
            st = ZEN_ENOMEM;
    }
    free(sorted);
    if (st == ZEN_OK)
        st = vocab_from_words(words, keep, out);
    if (st != ZEN_OK)
        free_words(words, max_size);
    return st;
}

void zen_vocab_destroy(zen_vocab *v)
{
    if (!v)
        return;
    free_words(v->words, v->size);
    strtab_free(&v->tab);
    free(v);
}

size_t zen_vocab_size(const zen_vocab *v)
{
    return v->size;
}

const char *zen_vocab_word(const zen_vocab *v, uint32_t id)
{
    return id < v->size ? v->words[id] : special_words[0];
}

uint32_t zen_vocab_lookup(const zen_vocab *v, const char *tok, size_t len)
{
    const strtab_entry *e = strtab_find(&v->tab, tok, len);
    return e->word ? e->id : ZEN_TOK_UNK;
}

typedef struct encode_ctx {
    const zen_vocab *v;
    uint32_t **ids;
    size_t *count, *cap;
    zen_status st;
} encode_ctx;

static zen_status push_id(uint32_t **ids, size_t *count, size_t *cap, uint32_t id)
{
    if (*count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 1024;
        uint32_t *p = zen_train_realloc_array(*ids, ncap, sizeof *p);
        if (!p)
            return ZEN_ENOMEM;
        *ids = p;
        *cap = ncap;
    }
    (*ids)[(*count)++] = id;
    return ZEN_OK;
}

static int encode_one(const char *tok, size_t len, void *user)
{
    encode_ctx *c = user;
    c->st = push_id(c->ids, c->count, c->cap, zen_vocab_lookup(c->v, tok, len));
    return c->st != ZEN_OK;
}

zen_status zen_vocab_encode_line(const zen_vocab *v, const char *line, size_t len, uint32_t **ids,
                                 size_t *count, size_t *cap)
{
    encode_ctx c = { v, ids, count, cap, ZEN_OK };
    zen_tok_split(line, len, encode_one, &c);
    if (c.st != ZEN_OK)
        return c.st;
    return push_id(ids, count, cap, ZEN_TOK_EOS);
}

size_t zen_vocab_decode(const zen_vocab *v, const uint32_t *ids, size_t n, char *out, size_t cap)
{
    size_t pos = 0;
    int line_start = 1;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const char *w = ids[i] == ZEN_TOK_EOS ? "\n" : zen_vocab_word(v, ids[i]);
        int punct = ids[i] != ZEN_TOK_EOS && ids[i] != ZEN_TOK_UNK && strlen(w) == 1 &&
                    !is_word_byte((unsigned char)w[0]);
        int space = !line_start && ids[i] != ZEN_TOK_EOS && !punct;
        size_t wl = strlen(w);
        if (pos + (size_t)space + wl + 1 > cap)
            break;
        if (space)
            out[pos++] = ' ';
        memcpy(out + pos, w, wl);
        pos += wl;
        line_start = ids[i] == ZEN_TOK_EOS;
    }
    out[pos] = 0;
    return pos;
}

zen_status zen_vocab_save(const zen_vocab *v, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ZEN_EIO;
    int bad = 0;
    for (size_t i = 0; i < v->size; i++)
        bad |= fprintf(f, "%s\n", v->words[i]) < 0;
    bad |= fflush(f) != 0;
    bad |= fclose(f) != 0;
    return bad ? ZEN_EIO : ZEN_OK;
}

zen_status zen_vocab_load(const char *path, zen_vocab **out)
{
    *out = NULL;
    FILE *f = NULL;
    char why[512];
    if (zen_file_open_input(path, UINT64_MAX, &f, NULL, why, sizeof why) != ZEN_OK)
        return ZEN_EIO;
    char line[4 * ZEN_TOK_MAX_WORD];
    size_t n = 0, cap = 0;
    char **words = NULL;
    zen_status st = ZEN_OK;
    while (st == ZEN_OK && fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n' || len - 1 > ZEN_TOK_MAX_WORD) {
            st = ZEN_ECORRUPT;
            break;
        }
        line[len - 1] = 0;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            char **p = zen_train_realloc_array(words, ncap, sizeof *p);
            if (!p) {
                st = ZEN_ENOMEM;
                break;
            }
            words = p;
            cap = ncap;
        }
        if (!(words[n] = strdup(line)))
            st = ZEN_ENOMEM;
        else
            n++;
    }
    if (ferror(f) && st == ZEN_OK)
        st = ZEN_EIO;
    fclose(f);
    if (st == ZEN_OK && (n < 2 || strcmp(words[0], special_words[0]) != 0 ||
                         strcmp(words[1], special_words[1]) != 0))
        st = ZEN_ECORRUPT;
    if (st == ZEN_OK)
        st = vocab_from_words(words, n, out);
    if (st != ZEN_OK)
        free_words(words, n);
    return st;
}

uint64_t zen_vocab_digest(const zen_vocab *v)
{
    uint64_t h = 0x766f636162ull;
    for (size_t i = 0; i < v->size; i++)
        h = zen_train_fnv1a(v->words[i], strlen(v->words[i]) + 1, h);
    return h;
}
