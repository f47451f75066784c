/*
 * AUTO's runtime, shared by its files (auto.h is its face):
 *   auto_slots.c    the process-wide slots of keyed tensors (profile, tuner, calibration)
 *   auto_records.c  the per-call record exchange and what the records say
 *   auto_sample.c   the measured profile: sampled densification ratios, block statistics
 *   auto_decide.c   calibration, prediction and the decision (zen__sparse_choose)
 */
#ifndef ZEN_SPARSE_AUTO_INTERNAL_H
#define ZEN_SPARSE_AUTO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sparse/model/cost.h"
#include "sparse/plan/auto_tune.h"
#include "sparse/sparse_internal.h"
#include "sparse/wire/xchg.h"

#define PROFILE_SLOTS     256
#define MAX_BITMAP_BLOCKS (1u << 20)

typedef struct profile_slot {
    uint64_t key; /* 0: free */
    uint64_t version;
    uint64_t calls;
    uint64_t tick;
    uint64_t digest; /* slot_digest of the agreed state, set by slot_put */
    zen_sparse_profile prof;
    zen_auto_tune tune;  /* online correction of the choice (auto_tune.h) */
    double pending_s;    /* this rank's time of tune.last, reported on the next call */
    double xchg_s;       /* this rank's time of the last record exchange */
    double lat_s;        /* measured step latency (EMA, agreed), 0: not yet */
    double cpu_scale;    /* measured / predicted coalesce time (EMA, agreed), 0: not yet */
    double spread;       /* a call's slowest-rank / median-rank time (EMA, agreed), 0: not yet */
    uint64_t since_full; /* calls decided without a record exchange since the last one */
    /* this rank's seconds of its last record exchange and decision (a re-measure apart) and of
     * its last profile re-measure, reported at the next exchange, and the key's calls' seconds
     * (a moving average of the agreed times): what spaces the two (bookkeeping_period) */
    double own_full_s, own_deep_s, call_s;
    double pred[ZEN_SPARSE_SCHEME_COUNT];  /* the tuner's predictions at the last exchange */
    double model[ZEN_SPARSE_SCHEME_COUNT]; /* the calibrated model's, for the statistics */
    double density, gamma_n, skew;         /* the statistics of the last exchange */
    /* the tunables the calls between exchanges decide with, read at the last exchange: a read
     * is a getenv and a parse, and the calls between exchanges read a dozen each */
    zen_auto_tune_params tp;
    /* calls between record exchanges and between profile re-measures (>= 1): at least
     * ZEN_SPARSE_AUTO_RECHECK and ZEN_SPARSE_PROFILE_PERIOD, spaced by bookkeeping_period */
    long recheck_every, profile_every;
    int calibrate_online; /* ZEN_SPARSE_CALIBRATE_ONLINE != 0 */
    /* the agreed mean density the tuner last started at (0: not yet): what tells a new regime
     * of the tensor (zen__auto_regime_moved) */
    double regime_density;
    /* this rank's input rows at its last record exchange: rank-local, outside the digest; a call
     * whose count moved beyond the regime factor (ZEN_SPARSE_AUTO_REGIME, read at the exchange
     * like tp) from it asks for an exchange */
    uint64_t own_nnz;
    double regime_factor;
} profile_slot;

typedef struct prof_geom {
    uint64_t rows;
    uint64_t brows, nblocks;
    int n;
} prof_geom;

/* Words of a rank's record: version, flags, nnz, n range counts, n block-range counts, then the
 * REC_TAIL words of the online calibration: the scheme of its last keyed call + 1 (0: none), that
 * call's seconds, the seconds of its last record exchange and of this call's coalesce, and the
 * seconds of its last exchange with the decision and of its last profile re-measure (doubles). */
#define REC_TAIL 6

#define REC_WORDS(n) (2 * (size_t)(n) + 3 + REC_TAIL)

/* One AUTO decision in progress. */
typedef struct choice {
    prof_geom g;
    int keyed; /* this call names a recurring tensor (and n > 1) */
    int have;  /* slot holds a measured profile every rank shares */
    int fresh; /* the slot is new on some rank: corrections start over */
    profile_slot slot;
    size_t stride;     /* REC_WORDS(n) */
    uint64_t *recs;    /* n records */
    int last_agreed;   /* every rank reports the same last scheme */
    double last_s;     /* and its time over the ranks (zen__auto_tune_call_time) */
    double last_max;   /* and the slowest rank's */
    double xchg_s;     /* the last record exchange, the maximum over ranks */
    double full_s;     /* the last exchange with its decision, the maximum over ranks */
    double deep_s;     /* the last profile re-measure, the maximum over ranks */
    double coal_s;     /* this call's coalesce, the maximum over ranks */
    double nnz_max;    /* the largest coalesced input */
    double deep_now_s; /* this call's profile re-measure on this rank, 0: none */
    int regime;        /* the agreed density left the slot's regime: re-measured, tuner restarts */
} choice;

/*
 * auto_slots.c: a new regime of a keyed tensor: x moved beyond factor f (ZEN_SPARSE_AUTO_REGIME; <= 1: never)
 * from ref, x / ref outside [1/f, f] (counts + 1, so an empty side compares). The tuner's measurements
 * (auto_tune.h) are ratios of measured over predicted time, and the model's error is not the
 * same at every size: a top-k hook's ratio warm-up (25%, 6.25%, 1.56%, 1% over its first steps)
 * left AUTO on the scheme it settled on at 6.25% (BLOCK, 10-37 ms a call) for 16 more steps of
 * the 1% calls, where HIERARCHICAL took 1.5-3 ms, until paired rechecks overturned it; and the
 * union density the profile measured at 25% was still the model's at 1%. So past the factor the
 * profile is measured again and the tuner starts over (docs/algorithms.md, "Regimes").
 */
int zen__auto_regime_moved(double x, double ref, double f);

/* auto_slots.c: a copy of key's slot (0: none); insert or update in (LRU eviction); this rank's
 * time of the call the slot's tuner chose last; the slot key of ctx's tensor on its rank. */
int zen__auto_slot_get(uint64_t key, profile_slot *out);
void zen__auto_slot_put(const profile_slot *in);
void zen__auto_slot_note_time(uint64_t key, double seconds);
uint64_t zen__auto_slot_key(const zen_sparse_ctx *ctx);

/* auto_sample.c: n * max / sum of load[0..n) (1 when empty); the measured part of the profile
 * (collective over ctx->comm inside cc). */
double zen__auto_skew(const double *load, int n);
zen_status zen__auto_deep_profile(zen_sparse_ctx *ctx, const zen_coll *cc, const prof_geom *g,
                                  const uint64_t *recs, zen_sparse_profile *p);

/* auto_records.c: the row and block geometry of c on n ranks; this rank's record; the record
 * exchange and, when due, the measured profile (collective); the profile the records give. */
void zen__auto_geometry(const zen_coo *c, int n, prof_geom *g);
void zen__auto_own_record(const zen_sparse_ctx *ctx, choice *ch, uint64_t *rec);
zen_status zen__auto_gather_profile(zen_sparse_ctx *ctx, choice *ch, const uint64_t *rec);
void zen__auto_summarize(const choice *ch, int n, double *load, zen_sparse_profile *p);

#endif
