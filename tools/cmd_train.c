/* zen train: train a GPT on a text corpus with data x tensor parallelism (src/train/train.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/sparse.h>
#include <zen/tp.h>

#include "cli.h"
#include "opt_parse.h"
#include "tp_emulation.h"
#include "train.h"

static void usage(FILE *f)
{
    zen_train_options d;
    zen_train_options_default(&d);
    fprintf(
        f,
        "usage: zen train [OPTIONS]\n"
        "Train a small GPT on the King James Bible (or --data FILE), printing progress, the\n"
        "validation loss against a unigram baseline, and a generated sample.\n"
        "\nmodel:\n"
        "  --layers N          transformer blocks (%d)\n"
        "  --d-model N         width (%d)\n"
        "  --heads N           attention heads, divisible by --tp (%d)\n"
        "  --d-ff N            MLP width, divisible by --tp (%d)\n"
        "  --ctx N             maximum context (%d)\n"
        "  --vocab-max N       vocabulary cap incl. <unk> and <eos> (%zu); also --vocab N\n"
        "  --min-count N       minimum count of a vocabulary word (%llu)\n"
        "\ntraining:\n"
        "  --steps N           optimizer steps; the cosine schedule ends here (%ld)\n"
        "  --stop-at N         stop after N steps of that schedule (to resume later)\n"
        "  --batch N           sequences per data-parallel rank per step (%d)\n"
        "  --seq N             tokens per sequence, <= ctx (%d)\n"
        "  --lr X              peak learning rate (%g); --min-lr X floor (%g)\n"
        "  --warmup N          linear warmup steps (%ld)\n"
        "  --weight-decay X    AdamW decoupled decay (%g); --grad-clip X global norm (%g)\n"
        "  --seed N            initialisation and data order (%llu)\n"
        "\nparallelism:\n"
        "  --dp N --tp N       data x tensor parallel ranks (%d x %d); inproc threads unless\n"
        "                      started as process ranks (zen launch -n DPxTP -- zen train ...)\n"
        "  --transport T       auto|inproc|shm|tcp|shm+tcp|mpi (auto: threads unless a\n"
        "                      launcher started this process, then its transport)\n"
        "  --threads N         BLAS threads per rank (0: cores / ranks in this process)\n"
        "  --sync-scheme S     embedding gradient sync: auto|balanced|hierarchical|allgather|\n"
        "                      block|ps|dense (auto = cost model; dense = plain allreduce)\n"
        "  --topk P            DGC-style top-k of the dense gradients (fraction, e.g. 0.01)\n"
        "                      with error feedback, synced by the sparse allreduce\n"
        "  --topk-warmup N     with --topk: the kept fraction decays exponentially from\n"
        "                      --topk-start X (%g) to P over the first N steps (DGC warm-up)\n"
        "  --topk-dense-from F with --topk: a warm-up step keeping at least F sends the whole\n"
        "                      residual through the dense allreduce (cheaper than a sparse\n"
        "                      call that dense; 0: never)\n"
        "  --topk-momentum M   with --topk: DGC momentum correction, velocity M accumulated\n"
        "                      before the selection, AdamW beta1 0 (0: error feedback only)\n"
        "  --topk-rescale      with --topk: a value that accumulated tau steps enters AdamW's\n"
        "                      second moment as g^2/tau^2, restoring the dense step size\n"
        "  --topk-global       with --topk: every rank receives only the k largest of the\n"
        "                      sum (global top-k; what the sum dropped goes back into each\n"
        "                      rank's residual); --sync-scheme auto, balanced or ps\n"
        "  --bucket SIZE       dense allreduce bucket (1M)\n"
        "  --slow RANK:FACTOR,...  emulated tp stragglers (or profile:F0,F1,...)\n"
        "  --slow-mode sleep|spin  --slow-rotate S   --balance none|resize|migrate|semi\n"
        "\ndata and output:\n"
        "  --data FILE         UTF-8 text, one example per line (default: KJV via `bible`);\n"
        "                      FILE.gz / FILE.dz are decompressed with gzip\n"
        "  --corpus C          kjv (default), gcide (the GNU dictionary of Debian's dict-gcide,\n"
        "                      5.4M words) or a FILE as for --data\n"
        "  --cache-dir DIR     token cache (%s)\n"
        "  --eval-interval N   steps between validation passes (%ld); --eval-batches N (%d)\n"
        "  --log-interval N    steps between progress lines (%ld)\n"
        "  --metrics FILE      one JSON object per step (a failed write fails the run)\n"
        "  --dump-grads DIR    per-rank embedding-gradient rows per step\n"
        "  --checkpoint-dir D  write D/checkpoint.zck (at the end and every interval)\n"
        "  --checkpoint-interval N\n"
        "  --resume PATH       continue from a checkpoint file or directory (bit-identical)\n"
        "  --sample-tokens N   tokens generated after training (%d); --prompt TEXT (\"%s\")\n"
        "  --json              final summary as one JSON object\n"
        "  --quiet             no progress lines\n",
        d.layers, d.d_model, d.heads, d.d_ff, d.ctx, d.vocab_max, (unsigned long long)d.min_count,
        d.steps, d.batch, d.seq, (double)d.lr, (double)d.min_lr, d.warmup, (double)d.weight_decay,
        (double)d.grad_clip, (unsigned long long)d.seed, d.dp, d.tp, d.topk_start, d.cache_dir,
        d.eval_interval, d.eval_batches, d.log_interval, d.sample_tokens, d.prompt);
}

/* One "--name VALUE" option: where its value goes and its range. */
typedef enum opt_kind {
    OPT_INT,
    OPT_LONG,
    OPT_U64,
    OPT_SIZE,
    OPT_FLOAT,
    OPT_DOUBLE,
    OPT_STR
} opt_kind;

typedef struct opt_def {
    const char *name;
    opt_kind kind;
    void *dst;
    double lo, hi;
} opt_def;

/* Store v into d; -1 when it does not parse or is out of range. */
static int set_opt(const opt_def *d, const char *v)
{
    long n = 0;
    double x = 0;
    switch (d->kind) {
    case OPT_STR:
        *(const char **)d->dst = v;
        return 0;
    case OPT_FLOAT:
    case OPT_DOUBLE:
        if (zen_parse_double(v, d->lo, d->hi, &x))
            return -1;
        if (d->kind == OPT_FLOAT)
            *(float *)d->dst = (float)x;
        else
            *(double *)d->dst = x;
        return 0;
    default:
        if (zen_parse_long(v, (long)d->lo, (long)d->hi, &n))
            return -1;
        if (d->kind == OPT_INT)
            *(int *)d->dst = (int)n;
        else if (d->kind == OPT_LONG)
            *(long *)d->dst = n;
        else if (d->kind == OPT_U64)
            *(uint64_t *)d->dst = (uint64_t)n;
        else
            *(size_t *)d->dst = (size_t)n;
        return 0;
    }
}

static int parse_named(const char *a, const char *v, zen_train_options *o, const char **slow)
{
    int bad = 0;
    if (strcmp(a, "--bucket") == 0) {
        bad = zen_parse_size(v, &o->bucket_bytes) != 0 || o->bucket_bytes < 4;
    } else if (strcmp(a, "--slow") == 0) {
        *slow = v; /* parsed once --tp is known */
    } else if (strcmp(a, "--transport") == 0) {
        if (zen_opt_transport(v, &o->transport) != 0)
            return -3;
    } else if (strcmp(a, "--sync-scheme") == 0) {
        o->emb_sync = strcmp(v, "dense") == 0 ? ZEN_EMB_SYNC_DENSE : ZEN_EMB_SYNC_SPARSE;
        if (o->emb_sync == ZEN_EMB_SYNC_SPARSE)
            bad = zen_sparse_scheme_parse(v, &o->sparse_scheme) != ZEN_OK;
    } else if (strcmp(a, "--balance") == 0) {
        bad = zen_cli_tp_parse_balance(v, &o->tp_opts.balance) != ZEN_OK;
    } else if (strcmp(a, "--slow-mode") == 0) {
        bad = zen_cli_tp_parse_slow_mode(v, &o->tp_emulation.mode) != ZEN_OK;
    } else {
        return -2;
    }
    return bad ? -1 : 0;
}

/* The options without a value; 1 when a was one of them. */
static int set_flag(const char *a, zen_train_options *o)
{
    if (strcmp(a, "--json") == 0)
        o->json = o->quiet = 1;
    else if (strcmp(a, "--quiet") == 0)
        o->quiet = 1;
    else if (strcmp(a, "--topk-global") == 0)
        o->topk_global = 1;
    else if (strcmp(a, "--topk-rescale") == 0)
        o->topk_rescale = 1;
    else
        return 0;
    return 1;
}

int zen_cmd_train(int argc, char **argv)
{
    zen_train_options o;
    zen_train_options_default(&o);
    const char *slow = NULL;
    const char *corpus = NULL;
    const double big = 1e15;
    const opt_def defs[] = {
        { "--layers", OPT_INT, &o.layers, 1, 256 },
        { "--d-model", OPT_INT, &o.d_model, 1, 65536 },
        { "--heads", OPT_INT, &o.heads, 1, 4096 },
        { "--d-ff", OPT_INT, &o.d_ff, 1, 1 << 20 },
        { "--ctx", OPT_INT, &o.ctx, 1, 1 << 16 },
        { "--vocab-max", OPT_SIZE, &o.vocab_max, 3, 1 << 24 },
        { "--vocab", OPT_SIZE, &o.vocab_max, 3, 1 << 24 },
        { "--min-count", OPT_U64, &o.min_count, 1, big },
        { "--steps", OPT_LONG, &o.steps, 1, big },
        { "--stop-at", OPT_LONG, &o.stop_at, 1, big },
        { "--batch", OPT_INT, &o.batch, 1, 1 << 20 },
        { "--seq", OPT_INT, &o.seq, 1, 1 << 16 },
        { "--warmup", OPT_LONG, &o.warmup, 0, big },
        { "--seed", OPT_U64, &o.seed, 0, big },
        { "--dp", OPT_INT, &o.dp, 1, 1024 },
        { "--tp", OPT_INT, &o.tp, 1, 1024 },
        { "--threads", OPT_INT, &o.threads, 0, 1024 },
        { "--eval-interval", OPT_LONG, &o.eval_interval, 0, big },
        { "--eval-batches", OPT_INT, &o.eval_batches, 1, 1 << 20 },
        { "--log-interval", OPT_LONG, &o.log_interval, 0, big },
        { "--checkpoint-interval", OPT_LONG, &o.checkpoint_interval, 0, big },
        { "--sample-tokens", OPT_INT, &o.sample_tokens, 0, 100000 },
        { "--slow-rotate", OPT_INT, &o.tp_emulation.rotate, 0, 1 << 30 },
        { "--lr", OPT_FLOAT, &o.lr, 0, 10 },
        { "--min-lr", OPT_FLOAT, &o.min_lr, 0, 10 },
        { "--weight-decay", OPT_FLOAT, &o.weight_decay, 0, 10 },
        { "--grad-clip", OPT_FLOAT, &o.grad_clip, 0, 1e9 },
        { "--topk", OPT_DOUBLE, &o.topk, 1e-9, 1 },
        { "--topk-warmup", OPT_LONG, &o.topk_warmup, 0, big },
        { "--topk-start", OPT_DOUBLE, &o.topk_start, 1e-9, 1 },
        { "--topk-dense-from", OPT_DOUBLE, &o.topk_dense_from, 0, 1 },
        { "--topk-momentum", OPT_FLOAT, &o.topk_momentum, 0, 0.9999 },
        { "--data", OPT_STR, &o.data_path, 0, 0 },
        { "--corpus", OPT_STR, &corpus, 0, 0 },
        { "--cache-dir", OPT_STR, &o.cache_dir, 0, 0 },
        { "--metrics", OPT_STR, &o.metrics_path, 0, 0 },
        { "--dump-grads", OPT_STR, &o.dump_grads_dir, 0, 0 },
        { "--checkpoint-dir", OPT_STR, &o.checkpoint_dir, 0, 0 },
        { "--resume", OPT_STR, &o.resume, 0, 0 },
        { "--prompt", OPT_STR, &o.prompt, 0, 0 },
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (zen_is_help(a)) {
            usage(stdout);
            return ZEN_EXIT_OK;
        }
        if (set_flag(a, &o))
            continue;
        if (strncmp(a, "--", 2) != 0)
            return zen_usage_error("train", "unexpected argument '%s'", a);
        if (i + 1 >= argc)
            return zen_usage_error("train", "%s needs a value", a);
        const char *v = argv[++i];
        int rc = -2;
        for (size_t k = 0; k < sizeof defs / sizeof defs[0] && rc == -2; k++)
            if (strcmp(a, defs[k].name) == 0)
                rc = set_opt(&defs[k], v);
        if (rc == -2)
            rc = parse_named(a, v, &o, &slow);
        if (rc == -2)
            return zen_usage_error("train", "unknown option '%s'", a);
        if (rc == -3)
            return zen_opt_transport_error("train", v);
        if (rc != 0)
            return zen_usage_error("train", "bad value '%s' for %s", v, a);
    }
    /* --corpus names the packaged corpora; anything else is a file, as for --data */
    if (corpus && strcmp(corpus, "kjv") == 0)
        o.data_path = NULL;
    else if (corpus && strcmp(corpus, "gcide") == 0)
        o.data_path = "/usr/share/dictd/gcide.dict.dz";
    else if (corpus)
        o.data_path = corpus;
    if (slow && zen_cli_tp_parse_slow(slow, o.tp, &o.tp_emulation) != ZEN_OK)
        return zen_usage_error("train", "bad --slow list '%s' for --tp %d", slow, o.tp);
    if (o.seq > o.ctx)
        return zen_usage_error("train", "--seq %d is longer than --ctx %d", o.seq, o.ctx);

    zen_train_result res;
    memset(&res, 0, sizeof res);
    zen_status st = zen_train_run(&o, NULL, &res);
    if (st != ZEN_OK)
        fprintf(stderr, "zen train: %s\n", res.error[0] ? res.error : zen_strerror(st));
    zen_train_result_free(&res);
    if (st == ZEN_EINVAL)
        return ZEN_EXIT_USAGE;
    return st == ZEN_OK ? ZEN_EXIT_OK : ZEN_EXIT_FAIL;
}
