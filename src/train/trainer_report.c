/* Progress lines, --metrics JSON lines and text sampling of the trainer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hash.h"
#include "trainer.h"

static void fmt_bytes(char *out, size_t n, double b)
{
    if (b >= 1e9)
        snprintf(out, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(out, n, "%.2f MB", b / 1e6);
    else if (b >= 1e3)
        snprintf(out, n, "%.1f kB", b / 1e3);
    else
        snprintf(out, n, "%.0f B", b);
}

static void fmt_eta(char *out, size_t n, double s)
{
    if (!(s >= 0) || s > 1e7)
        snprintf(out, n, "?");
    else if (s >= 3600)
        snprintf(out, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(out, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(out, n, "%.0fs", s);
}

void zen_report_progress(FILE *f, const zen_step_report *r)
{
    char val[32] = "", sync[96] = "", tp[160] = "", eta[32], b1[24], b2[24];
    int w = (int)snprintf(NULL, 0, "%ld", r->steps);
    if (!isnan(r->val_loss))
        snprintf(val, sizeof val, " val %.3f |", r->val_loss);
    if (r->bytes_dense > 0) {
        fmt_bytes(b1, sizeof b1, (double)r->bytes_synced);
        fmt_bytes(b2, sizeof b2, (double)r->bytes_dense);
        /* what this rank sent in the dp gradient sync, next to what a dense ring allreduce of
         * every gradient would send: "dense" alone read as if the dense scheme had run */
        snprintf(sync, sizeof sync, " | sent %s (dense allreduce: %s)", b1, b2);
    }
    /* who the tp group waits for: from the communicator's arrival stamps */
    char late[48] = "";
    if (r->late_rank >= 0)
        snprintf(late, sizeof late, ", waits %.1f ms for tp rank %d", r->late_ms, r->late_rank);
    if (r->balance && strcmp(r->balance, "none") != 0)
        snprintf(tp, sizeof tp, " | tp %s: %d straggler(s), keep %.2f, migrated %ld%s",
                 r->balance ? r->balance : "none", r->stragglers, r->tp_keep_fraction,
                 r->migrated_cols, late);
    else if (late[0])
        snprintf(tp, sizeof tp, " | tp%s", late);
    fmt_eta(eta, sizeof eta, r->eta_s);
    fprintf(f,
            "step %*ld/%ld | loss %.3f |%s %6.0f tok/s | %6.1f ms/step (compute %.1f, comm %.1f, "
            "wait %.1f)%s%s | lr %.2e | eta %s\n",
            w, r->step + 1, r->steps, r->loss, val, r->tokens_per_s, r->ms_step, r->ms_compute,
            r->ms_comm, r->ms_wait, sync, tp, r->lr, eta);
    fflush(f);
}

void zen_json_number(FILE *f, const char *key, double v)
{
    /* JSON has no NaN or infinity: a diverged loss is written as null */
    if (isfinite(v))
        fprintf(f, ",\"%s\":%.6g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

int zen_report_metrics(FILE *f, const zen_step_report *r)
{
    fprintf(f, "{\"step\":%ld", r->step + 1);
    zen_json_number(f, "loss", r->loss);
    if (!isnan(r->val_loss))
        zen_json_number(f, "val_loss", r->val_loss);
    zen_json_number(f, "lr", r->lr);
    zen_json_number(f, "grad_norm", r->grad_norm);
    zen_json_number(f, "tokens_per_s", r->tokens_per_s);
    fprintf(f,
            ",\"ms_step\":%.4f,\"ms_compute\":%.4f,\"ms_comm\":%.4f,\"ms_wait\":%.4f,"
            "\"bytes_synced\":%llu,\"bytes_dense\":%llu,\"topk_keep\":%.6g,\"emb_rows\":%zu,"
            "\"emb_scheme\":\"%s\",\"balance\":\"%s\",\"stragglers\":%d,"
            "\"keep_fraction\":%.6g,\"migrated_cols\":%ld,\"last_arrival_rank\":%d,"
            "\"arrival_spread_ms\":%.4f,\"tp_ms_wait\":%.4f,\"ms_opt\":%.4f",
            r->ms_step, r->ms_compute, r->ms_comm, r->ms_wait, (unsigned long long)r->bytes_synced,
            (unsigned long long)r->bytes_dense, r->keep_fraction, r->emb_rows,
            r->emb_scheme ? r->emb_scheme : "none", r->balance ? r->balance : "none", r->stragglers,
            r->tp_keep_fraction, r->migrated_cols, r->late_rank, r->late_ms, r->tp_ms_wait,
            r->ms_opt);
    static const char *const phase[ZEN_SYNC_PHASES] = { "pack",   "select", "reduce",
                                                        "unpack", "emb",    "buckets" };
    for (int i = 0; i < ZEN_SYNC_PHASES; i++)
        fprintf(f, ",\"sync_%s_ms\":%.4f", phase[i], r->ms_sync_phase[i]);
    /* the top-k sparse allreduce's phases (zen_sparse_phase order), ms */
    fputs(",\"topk_sparse_ms\":[", f);
    for (int i = 0; i < ZEN_PHASE_COUNT; i++)
        fprintf(f, "%s%.4f", i ? "," : "", r->topk_phase_us[i] / 1e3);
    fputc(']', f);
    fputs("}\n", f);
    /* fprintf's errors are sticky in ferror; the flush reports a full disk (ENOSPC) */
    return fflush(f) != 0 || ferror(f) ? -1 : 0;
}

/* ---- sampling ---- */

#define SAMPLE_TOPK        40
#define SAMPLE_TEMPERATURE 0.8

/* Draw from the SAMPLE_TOPK most likely tokens (never <unk>) at the sampling temperature. */
static int32_t draw(const float *logits, int vocab, uint64_t *rng)
{
    int32_t best[SAMPLE_TOPK];
    int nb = 0;
    for (int32_t i = 0; i < vocab; i++) {
        if (i == (int32_t)ZEN_TOK_UNK || !isfinite(logits[i]))
            continue;
        /* insertion into a small sorted list: vocab x 40 worst case, cheap at this size */
        int pos = nb < SAMPLE_TOPK ? nb : SAMPLE_TOPK;
        while (pos > 0 && logits[best[pos - 1]] < logits[i])
            pos--;
        if (pos >= SAMPLE_TOPK)
            continue;
        int last = nb < SAMPLE_TOPK ? nb : SAMPLE_TOPK - 1;
        memmove(best + pos + 1, best + pos, (size_t)(last - pos) * sizeof best[0]);
        best[pos] = i;
        if (nb < SAMPLE_TOPK)
            nb++;
    }
    if (nb == 0)
        return (int32_t)ZEN_TOK_EOS;
    double p[SAMPLE_TOPK], sum = 0;
    for (int j = 0; j < nb; j++) {
        p[j] = exp((logits[best[j]] - logits[best[0]]) / SAMPLE_TEMPERATURE);
        sum += p[j];
    }
    *rng = zen_train_mix64(*rng + 0x9e3779b97f4a7c15ull);
    double u = (double)(*rng >> 11) / 9007199254740992.0 * sum;
    for (int j = 0; j < nb; j++) {
        u -= p[j];
        if (u <= 0)
            return best[j];
    }
    return best[nb - 1];
}

zen_status zen_trainer_sample(zen_gpt *m, const zen_vocab *v, const char *prompt, int ntokens,
                              uint64_t seed, char *out, size_t outlen)
{
    const zen_gpt_config *cfg = zen_gpt_get_config(m);
    zen_comm *tp = zen_gpt_tp_comm(m);
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    zen_status st = ZEN_OK;
    if (prompt && *prompt) {
        st = zen_vocab_encode_line(v, prompt, strlen(prompt), &ids, &n, &cap);
        if (st == ZEN_OK)
            n--; /* drop the end-of-line token: the sample continues the prompt's line */
    }
    size_t total = n + (size_t)ntokens + 1;
    uint32_t *all = st == ZEN_OK ? zen_train_malloc_array(total, sizeof *all) : NULL;
    int32_t *win = zen_train_malloc_array((size_t)cfg->ctx, sizeof *win);
    float *logits = zen_train_malloc_array((size_t)cfg->vocab, sizeof *logits);
    if (st == ZEN_OK && (!all || !win || !logits))
        st = ZEN_ENOMEM;
    size_t len = 0;
    if (st == ZEN_OK) {
        if (n == 0)
            all[len++] = ZEN_TOK_EOS; /* no prompt: start as after a verse */
        for (size_t i = 0; i < n; i++)
            all[len++] = ids[i];
    }
    size_t start = n == 0 ? 1 : 0;
    uint64_t rng = seed ^ 0x73616d706c65ull;
    zen_gpt_set_training(m, 0);
    for (int k = 0; k < ntokens && st == ZEN_OK; k++) {
        size_t T = len < (size_t)cfg->ctx ? len : (size_t)cfg->ctx;
        for (size_t t = 0; t < T; t++)
            win[t] = (int32_t)all[len - T + t];
        st = zen_gpt_forward(m, win, NULL, 1, (int)T, NULL);
        if (st == ZEN_OK)
            st = zen_gpt_logits(m, 0, -1, logits);
        int32_t next = 0;
        if (st == ZEN_OK && zen_comm_rank(tp) == 0)
            next = draw(logits, cfg->vocab, &rng);
        /* logits are replicated over tp, but one rank choosing keeps the ranks' inputs equal
         * even if two ranks rounded a logit differently */
        if (st == ZEN_OK && zen_comm_size(tp) > 1)
            st = zen_broadcast(tp, &next, 1, ZEN_I32, 0);
        if (st == ZEN_OK)
            all[len++] = (uint32_t)next;
    }
    zen_gpt_set_training(m, 1);
    if (st == ZEN_OK)
        zen_vocab_decode(v, all + start, len - start, out, outlen);
    free(ids);
    free(all);
    free(win);
    free(logits);
    return st;
}
