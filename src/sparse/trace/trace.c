/*
 * Gradient trace files (API in include/zen/sparse.h, format in docs/trace-format.md). The file is
 * built in memory and checksummed (FNV-1a 64 over every byte before the trailer), then written to a
 * temporary name and renamed, so a reader never sees half a file. All integers are little-endian;
 * the reader decodes byte by byte, so it works on any host and never trusts a length before
 * checking it against the bytes that remain.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <zen/sparse.h>

#include "common/alloc.h"
#include "common/checked.h"
#include "common/hash.h"
#include "common/input.h"
#include "common/log.h"

#define TRACE_MAGIC      "ZGRD"
#define TRACE_VERSION    1u
#define TRACE_CHECK_SEED 0x7a656e7472616365ull /* "zentrace" */

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int failed;
} wbuf;

static void put(wbuf *b, const void *src, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *q = zen__realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_le(wbuf *b, uint64_t v, int bytes)
{
    uint8_t x[8];
    for (int i = 0; i < bytes; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, (size_t)bytes);
}

zen_status zen_trace_path(char *out, size_t size, const char *dir, uint32_t rank, uint64_t step)
{
    int k = snprintf(out, size, "%s/rank%u-step%06llu.zgrad", dir, rank, (unsigned long long)step);
    return k < 0 || (size_t)k >= size ? ZEN_EINVAL : ZEN_OK;
}

zen_status zen_trace_write(const char *path, const zen_trace_step *s)
{
    wbuf b = { 0 };
    put(&b, TRACE_MAGIC, 4);
    put_le(&b, TRACE_VERSION, 4);
    put_le(&b, s->rank, 4);
    put_le(&b, s->world_size, 4);
    put_le(&b, s->step, 8);
    put_le(&b, s->count, 4);
    put_le(&b, 0, 4);
    if (s->count > UINT32_MAX || s->world_size == 0 || s->rank >= s->world_size) {
        zen__free(b.p);
        return ZEN_EINVAL;
    }
    for (size_t t = 0; t < s->count; t++) {
        const zen_trace_tensor *x = &s->tensors[t];
        size_t nlen = strnlen(x->name, sizeof x->name), nvals;
        if (nlen > ZEN_TRACE_NAME_MAX || x->width == 0 || x->rows > UINT32_MAX ||
            zen_mul_overflow((size_t)x->nnz, x->width, &nvals)) {
            zen__free(b.p);
            return ZEN_EINVAL;
        }
        for (uint64_t i = 0; i < x->nnz; i++)
            if (x->indices[i] >= x->rows) {
                zen__free(b.p);
                return ZEN_EINVAL;
            }
        put_le(&b, nlen, 2);
        put(&b, x->name, nlen);
        put_le(&b, x->rows, 8);
        put_le(&b, x->width, 4);
        put_le(&b, 0, 4);
        put_le(&b, x->nnz, 8);
        for (uint64_t i = 0; i < x->nnz; i++)
            put_le(&b, x->indices[i], 4);
        for (size_t i = 0; i < nvals; i++) {
            uint32_t bits;
            memcpy(&bits, &x->values[i], 4);
            put_le(&b, bits, 4);
        }
    }
    if (!b.failed)
        put_le(&b, zen__fnv1a(b.p, b.len, TRACE_CHECK_SEED), 8);
    if (b.failed) {
        zen__free(b.p);
        return ZEN_ENOMEM;
    }
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        zen__free(b.p);
        return ZEN_EINVAL;
    }
    FILE *f = fopen(tmp, "wb");
    zen_status st = ZEN_OK;
    if (!f || fwrite(b.p, 1, b.len, f) != b.len)
        st = ZEN_EIO;
    if (f && fclose(f) != 0)
        st = ZEN_EIO;
    if (st == ZEN_OK && rename(tmp, path) != 0)
        st = ZEN_EIO;
    if (st != ZEN_OK)
        remove(tmp);
    zen__free(b.p);
    return st;
}

typedef struct rbuf {
    const uint8_t *p;
    size_t len, pos;
} rbuf;

static int get_le(rbuf *r, int bytes, uint64_t *v)
{
    if (r->len - r->pos < (size_t)bytes)
        return -1;
    *v = 0;
    for (int i = 0; i < bytes; i++)
        *v |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
    r->pos += (size_t)bytes;
    return 0;
}

void zen_trace_free(zen_trace_step *s)
{
    if (!s)
        return;
    for (size_t t = 0; s->tensors && t < s->count; t++) {
        zen__free(s->tensors[t].indices);
        zen__free(s->tensors[t].values);
    }
    zen__free(s->tensors);
    s->tensors = NULL;
    s->count = 0;
}

static zen_status parse(rbuf *r, zen_trace_step *s)
{
    uint64_t v, count, version;
    if (r->len < 4 + 8 || memcmp(r->p, TRACE_MAGIC, 4) != 0)
        return ZEN_ECORRUPT;
    r->pos = 4;
    /* checksum first: the trailer covers everything before it */
    const uint8_t *t = r->p + r->len - 8;
    uint64_t want = 0;
    for (int i = 0; i < 8; i++)
        want |= (uint64_t)t[i] << (8 * i);
    if (zen__fnv1a(r->p, r->len - 8, TRACE_CHECK_SEED) != want)
        return ZEN_ECORRUPT;
    r->len -= 8;
    if (get_le(r, 4, &version) || version != TRACE_VERSION)
        return ZEN_ECORRUPT;
    if (get_le(r, 4, &v))
        return ZEN_ECORRUPT;
    s->rank = (uint32_t)v;
    if (get_le(r, 4, &v))
        return ZEN_ECORRUPT;
    s->world_size = (uint32_t)v;
    if (s->world_size == 0 || s->rank >= s->world_size)
        return ZEN_ECORRUPT; /* the replay picks files by rank: a rank outside its world is no rank */
    if (get_le(r, 8, &s->step) || get_le(r, 4, &count) || get_le(r, 4, &v))
        return ZEN_ECORRUPT;
    /* a tensor takes at least 26 bytes (name length, rows, width, reserved, nnz; an empty name
     * and no entries): bound count by what remains */
    if (count > (r->len - r->pos) / 26)
        return ZEN_ECORRUPT;
    s->tensors = zen__calloc(count ? count : 1, sizeof *s->tensors);
    if (!s->tensors)
        return ZEN_ENOMEM;
    for (uint64_t k = 0; k < count; k++) {
        zen_trace_tensor *x = &s->tensors[k];
        s->count = (size_t)k + 1;
        uint64_t nlen, width, nnz;
        if (get_le(r, 2, &nlen) || nlen > ZEN_TRACE_NAME_MAX || r->len - r->pos < nlen)
            return ZEN_ECORRUPT;
        memcpy(x->name, r->p + r->pos, nlen);
        x->name[nlen] = 0;
        r->pos += nlen;
        if (get_le(r, 8, &x->rows) || get_le(r, 4, &width) || get_le(r, 4, &v) ||
            get_le(r, 8, &nnz))
            return ZEN_ECORRUPT;
        if (width == 0 || x->rows > UINT32_MAX)
            return ZEN_ECORRUPT;
        x->width = (uint32_t)width;
        /* nnz * (4 + 4w) bytes must remain */
        size_t remain = r->len - r->pos;
        if (nnz > remain / (4 + 4 * width))
            return ZEN_ECORRUPT;
        x->nnz = nnz;
        x->indices = zen__malloc_array(nnz ? (size_t)nnz : 1, sizeof *x->indices);
        x->values = zen__malloc_array(nnz ? (size_t)(nnz * width) : 1, sizeof *x->values);
        if (!x->indices || !x->values)
            return ZEN_ENOMEM;
        for (uint64_t i = 0; i < nnz; i++) {
            get_le(r, 4, &v);
            if (v >= x->rows)
                return ZEN_ECORRUPT;
            x->indices[i] = (uint32_t)v;
        }
        for (uint64_t i = 0; i < nnz * width; i++) {
            get_le(r, 4, &v);
            uint32_t bits = (uint32_t)v;
            memcpy(&x->values[i], &bits, 4);
        }
    }
    return r->pos == r->len ? ZEN_OK : ZEN_ECORRUPT;
}

zen_status zen_trace_read(const char *path, zen_trace_step *out)
{
    memset(out, 0, sizeof *out);
    /* The file is parsed in memory and its tensors take about as much again: allow half of
     * what is available, and only regular files (a device would be read forever, a FIFO waited
     * on). */
    uint64_t avail = zen__mem_available_bytes(), size = 0;
    char why[512];
    FILE *f = zen__open_input(path, avail / 2, &size, why, sizeof why);
    if (!f) {
        int err = errno, missing = err == ENOENT; /* ordinary: the bench probes for steps */
        if (!missing)
            ZEN_ERROR("sparse", "trace: %s%s", why,
                      err == EFBIG ? " (half the available memory)" : "");
        return missing ? ZEN_EIO : ZEN_EINVAL;
    }
    uint8_t *data = zen__malloc(size ? (size_t)size : 1);
    zen_status st = data ? ZEN_OK : ZEN_ENOMEM;
    /* one byte more than the size: a file that grew since fstat is refused as corrupt */
    if (st == ZEN_OK && fread(data, 1, (size_t)size, f) != size)
        st = ferror(f) ? ZEN_EIO : ZEN_ECORRUPT;
    if (st == ZEN_OK && fgetc(f) != EOF)
        st = ZEN_ECORRUPT;
    fclose(f);
    if (st == ZEN_OK) {
        rbuf r = { data, (size_t)size, 0 };
        st = parse(&r, out);
    }
    zen__free(data);
    if (st != ZEN_OK)
        zen_trace_free(out);
    return st;
}
