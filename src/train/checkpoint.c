/* Checkpoint files: atomic write, verified read (see checkpoint.h for the layout). */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "errbuf.h"
#include "hash.h"

#define CKPT_MAGIC   "ZENCKPT1"
#define CKPT_VERSION 1u

typedef struct ckpt_header {
    char magic[8];
    uint32_t version;
    uint32_t reserved;
    uint64_t step;
    uint64_t config_bytes;
    uint64_t nsections;
    uint64_t payload_bytes;
    uint64_t payload_sum;
    uint64_t header_sum; /* of the fields above */
} ckpt_header;

typedef struct section_head {
    char name[ZEN_CKPT_NAME_MAX];
    uint64_t count;
} section_head;

static uint64_t header_sum(const ckpt_header *h)
{
    return zen_train_fnv1a(h, offsetof(ckpt_header, header_sum), 0x636b7074ull);
}

void zen_ckpt_resolve(const char *arg, char *out, size_t outlen)
{
    struct stat sb;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(out, outlen, "%s/%s", arg, ZEN_CKPT_FILE);
    else
        snprintf(out, outlen, "%s", arg);
}

/* The payload checksum (FNV-1a 64) is accumulated while it is written: hash.h's streaming form. */
static int write_all(int fd, const void *buf, size_t n, uint64_t *sum)
{
    const char *p = buf;
    if (sum)
        *sum = zen_train_fnv1a_update(*sum, buf, n);
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void fsync_dir_of(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

zen_status zen_ckpt_save(const char *path, const char *config, uint64_t step,
                         const zen_ckpt_section *sections, size_t nsections, char *err,
                         size_t errlen)
{
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        zen_train_set_err(err, errlen, "checkpoint path too long");
        return ZEN_EINVAL;
    }
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.step = step;
    h.config_bytes = strlen(config);
    h.nsections = nsections;
    h.payload_bytes = h.config_bytes;
    for (size_t i = 0; i < nsections; i++) {
        if (strlen(sections[i].name) >= ZEN_CKPT_NAME_MAX) {
            zen_train_set_err(err, errlen, "checkpoint section name too long: %s",
                              sections[i].name);
            return ZEN_EINVAL;
        }
        h.payload_bytes += sizeof(section_head) + sections[i].count * sizeof(float);
    }
    /* the payload checksum is computed while writing, so the header goes in last (pwrite) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        zen_train_set_err(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return ZEN_EIO;
    }
    int bad = write_all(fd, &h, sizeof h, NULL);
    uint64_t sum = ZEN_TRAIN_FNV_BASIS;
    bad = bad || write_all(fd, config, h.config_bytes, &sum);
    for (size_t i = 0; i < nsections && !bad; i++) {
        section_head sh;
        memset(&sh, 0, sizeof sh);
        memcpy(sh.name, sections[i].name, strlen(sections[i].name));
        sh.count = sections[i].count;
        bad = write_all(fd, &sh, sizeof sh, &sum) ||
              write_all(fd, sections[i].data, sections[i].count * sizeof(float), &sum);
    }
    h.payload_sum = sum;
    h.header_sum = header_sum(&h);
    bad = bad || pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h;
    bad = bad || fsync(fd) != 0;
    int saved_errno = errno;
    bad = (close(fd) != 0) || bad;
    if (bad || rename(tmp, path) != 0) {
        if (!bad)
            saved_errno = errno;
        unlink(tmp);
        zen_train_set_err(err, errlen, "writing checkpoint %s failed: %s", path,
                          strerror(saved_errno));
        return ZEN_EIO;
    }
    fsync_dir_of(path);
    return ZEN_OK;
}

/* Report the first "key=value" line that differs between two configuration texts. */
static void config_diff(const char *have, const char *want, char *err, size_t errlen,
                        const char *path)
{
    const char *a = have, *b = want;
    while (*a || *b) {
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        if (la != lb || memcmp(a, b, la) != 0) {
            zen_train_set_err(
                err, errlen,
                "checkpoint %s was made with a different configuration: it has '%.*s', this "
                "run has '%.*s'",
                path, (int)la, a, (int)lb, b);
            return;
        }
        a += la + (ea ? 1 : 0);
        b += lb + (eb ? 1 : 0);
    }
    zen_train_set_err(err, errlen, "checkpoint %s: configuration differs", path);
}

void zen_ckpt_remove_stale(const char *path)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    char prefix[300];
    if (snprintf(prefix, sizeof prefix, "%s.tmp.", base) >= (int)sizeof prefix)
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        if (strncmp(e->d_name, prefix, plen) != 0)
            continue;
        long pid = strtol(e->d_name + plen, &end, 10);
        /* a writer that is still alive (another job sharing the directory) keeps its file */
        if (*end != '\0' || pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno == EPERM))
            continue;
        char full[1400];
        if (snprintf(full, sizeof full, "%s/%s", dir, e->d_name) < (int)sizeof full &&
            unlink(full) == 0)
            zen_log(ZEN_LOG_INFO, "train", "removed %s, left by an interrupted checkpoint write",
                    full);
    }
    closedir(d);
}

/* Walks the section table after the config: found[i] points at the values of sections[i]. Every
 * wanted section must be there with the count this model needs. */
static zen_status locate_sections(const char *path, const char *payload, const ckpt_header *h,
                                  const zen_ckpt_section *sections, size_t nsections,
                                  const char **found, char *err, size_t errlen)
{
    size_t off = h->config_bytes;
    for (uint64_t s = 0; s < h->nsections; s++) {
        section_head sh;
        if (h->payload_bytes - off < sizeof sh) {
            zen_train_set_err(err, errlen, "checkpoint %s: truncated section table (corrupt)",
                              path);
            return ZEN_ECORRUPT;
        }
        memcpy(&sh, payload + off, sizeof sh);
        off += sizeof sh;
        sh.name[ZEN_CKPT_NAME_MAX - 1] = 0;
        if (sh.count > (h->payload_bytes - off) / sizeof(float)) {
            zen_train_set_err(err, errlen, "checkpoint %s: section %s overruns the file (corrupt)",
                              path, sh.name);
            return ZEN_ECORRUPT;
        }
        for (size_t i = 0; i < nsections; i++) {
            if (strcmp(sections[i].name, sh.name) != 0)
                continue;
            if (sh.count != sections[i].count) {
                zen_train_set_err(err, errlen,
                                  "checkpoint %s: section %s has %llu values, this model needs %zu",
                                  path, sh.name, (unsigned long long)sh.count, sections[i].count);
                return ZEN_EMISMATCH;
            }
            found[i] = payload + off;
        }
        off += sh.count * sizeof(float);
    }
    for (size_t i = 0; i < nsections; i++) {
        if (!found[i]) {
            zen_train_set_err(err, errlen, "checkpoint %s has no section %s", path,
                              sections[i].name);
            return ZEN_EMISMATCH;
        }
    }
    return ZEN_OK;
}

/* Checksums only prove the bytes are the ones written: a run that diverged saves NaN or Inf
 * faithfully, and resuming from it would skip every step (non-finite loss) and exit 0. */
static zen_status check_finite(const char *path, const zen_ckpt_section *sections, size_t nsections,
                               const char **found, char *err, size_t errlen)
{
    for (size_t i = 0; i < nsections; i++) {
        for (size_t k = 0; k < sections[i].count; k++) {
            float v;
            memcpy(&v, found[i] + k * sizeof v, sizeof v);
            if (!isfinite(v)) {
                zen_train_set_err(err, errlen,
                                  "checkpoint %s: section %s holds a non-finite value (%g) at %zu: "
                                  "the run that saved it diverged; resume from an earlier one",
                                  path, sections[i].name, (double)v, k);
                return ZEN_ECORRUPT;
            }
        }
    }
    return ZEN_OK;
}

zen_status zen_ckpt_load(const char *path, const char *expect_config, uint64_t *step,
                         zen_ckpt_section *sections, size_t nsections, char *err, size_t errlen)
{
    FILE *f = NULL;
    char why[512];
    if (zen_file_open_input(path, UINT64_MAX, &f, NULL, why, sizeof why) != ZEN_OK) {
        zen_train_set_err(err, errlen, "checkpoint: %s", why);
        return ZEN_EIO;
    }
    zen_status st = ZEN_ECORRUPT;
    char *payload = NULL;
    ckpt_header h;
    struct stat sb;
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, CKPT_MAGIC, 8) != 0) {
        zen_train_set_err(err, errlen, "%s is not a zen checkpoint (bad magic or too short)", path);
        goto out;
    }
    if (h.header_sum != header_sum(&h) || h.version != CKPT_VERSION) {
        zen_train_set_err(err, errlen,
                          "checkpoint %s: header checksum or version mismatch (corrupt)", path);
        goto out;
    }
    if (fstat(fileno(f), &sb) != 0 || (uint64_t)sb.st_size != sizeof h + h.payload_bytes) {
        zen_train_set_err(err, errlen,
                          "checkpoint %s: size %lld, header says %llu (truncated or corrupt)", path,
                          (long long)sb.st_size, (unsigned long long)(sizeof h + h.payload_bytes));
        goto out;
    }
    payload = malloc(h.payload_bytes + 1);
    if (!payload) {
        st = ZEN_ENOMEM;
        zen_train_set_err(err, errlen, "out of memory reading checkpoint %s", path);
        goto out;
    }
    if (fread(payload, 1, h.payload_bytes, f) != h.payload_bytes ||
        zen_train_fnv1a_update(ZEN_TRAIN_FNV_BASIS, payload, h.payload_bytes) != h.payload_sum) {
        zen_train_set_err(err, errlen, "checkpoint %s failed its checksum (corrupt)", path);
        goto out;
    }
    if (h.config_bytes > h.payload_bytes) {
        zen_train_set_err(err, errlen, "checkpoint %s: bad config length (corrupt)", path);
        goto out;
    }
    char save = payload[h.config_bytes];
    payload[h.config_bytes] = 0;
    if (expect_config && strcmp(payload, expect_config) != 0) {
        config_diff(payload, expect_config, err, errlen, path);
        st = ZEN_EMISMATCH;
        goto out;
    }
    payload[h.config_bytes] = save;
    /* locate every wanted section before copying any */
    const char **found = zen_train_calloc(nsections ? nsections : 1, sizeof *found);
    if (!found) {
        st = ZEN_ENOMEM;
        zen_train_set_err(err, errlen, "out of memory reading checkpoint %s", path);
        goto out;
    }
    st = locate_sections(path, payload, &h, sections, nsections, found, err, errlen);
    if (st == ZEN_OK)
        st = check_finite(path, sections, nsections, found, err, errlen);
    if (st == ZEN_OK)
        for (size_t i = 0; i < nsections; i++)
            memcpy(sections[i].data, found[i], sections[i].count * sizeof(float));
    free(found);
    if (st != ZEN_OK)
        goto out;
    *step = h.step;
    st = ZEN_OK;
out:
    free(payload);
    fclose(f);
    return st;
}
