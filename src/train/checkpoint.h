/*
 * checkpoint.h - crash-safe checkpoint files of the trainer.
 *
 * A checkpoint holds a configuration text ("key=value" lines: everything that must agree for a
 * resume to be exact), the step to continue from, and named float sections (weights, optimizer
 * moments) in the model's canonical order, independent of dp and tp.
 *
 * File layout (little-endian host order, this build only):
 *   header   magic "ZENCKPT1", version, step, config bytes, section count, payload checksum,
 *            header checksum
 *   config   the text
 *   sections per section: name (32 bytes, NUL padded), u64 count, count f32
 * Checksums are FNV-1a over the bytes. Writing goes to "<path>.tmp.<pid>", fsync, rename over
 * path, fsync of the directory: a reader sees the old file or the new one, never a mix.
 * Loading reads and verifies everything before touching the destination buffers, so a refused
 * checkpoint changes nothing.
 */
#ifndef ZEN_TRAIN_CHECKPOINT_H
#define ZEN_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#define ZEN_CKPT_NAME_MAX 32
#define ZEN_CKPT_FILE     "checkpoint.zck"

typedef struct zen_ckpt_section {
    const char *name; /* < ZEN_CKPT_NAME_MAX bytes */
    float *data;      /* save: read; load: written (count floats) */
    size_t count;
} zen_ckpt_section;

/* Write atomically. err gets a reason on failure (ZEN_EIO, ZEN_EINVAL). */
zen_status zen_ckpt_save(const char *path, const char *config, uint64_t step,
                         const zen_ckpt_section *sections, size_t nsections, char *err,
                         size_t errlen);

/*
 * Load path into the given sections (matched by name; every section must be present with the
 * expected count). When expect_config is not NULL the stored configuration must equal it; the
 * first differing key is named in err. Errors: ZEN_EIO (cannot read), ZEN_ECORRUPT (bad magic,
 * checksum, truncated, or a NaN/Inf value in a wanted section), ZEN_EMISMATCH (configuration or
 * section shapes differ).
 */
zen_status zen_ckpt_load(const char *path, const char *expect_config, uint64_t *step,
                         zen_ckpt_section *sections, size_t nsections, char *err, size_t errlen);

/* Remove "<path>.tmp.<pid>" files whose writer no longer runs (a kill during zen_ckpt_save leaves
 * a full-size one). Best effort: errors are ignored. */
void zen_ckpt_remove_stale(const char *path);

/* Resolve a --resume argument: a directory means <dir>/checkpoint.zck. */
void zen_ckpt_resolve(const char *arg, char *out, size_t outlen);

#endif
