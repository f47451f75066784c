/* The rows of the tunables table (tunables.c), their checks (tunables_check.c) and validators
 * (tunables_value.c); the typed getters are in tunables_get.c. */
#ifndef ZEN_COMMON_TUNABLES_TABLE_H
#define ZEN_COMMON_TUNABLES_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef enum zen_param_kind {
    PK_LONG,    /* decimal integer in [lo, hi] */
    PK_DOUBLE,  /* finite number in [lo, hi] */
    PK_TIMEOUT, /* seconds > 0, or inf/infinity/none */
    PK_U64,     /* decimal 0 .. 2^64-1, no sign */
    PK_CHOICE,  /* one of words (any case) */
    PK_LIST,    /* comma list of words */
    PK_FACTORS, /* comma list of word=number, number in [lo, hi] */
    PK_STRING   /* free-form, checked by check */
} zen_param_kind;

enum {
    PF_STRICT = 1, /* malformed: the reader refuses to start (zen__param_strict), not a default */
    PF_SECRET = 2  /* the value is never shown or logged */
};

/* NULL when v is acceptable; else why not (static text, or written into why). */
typedef const char *(*zen_param_validator)(const char *v, char *why, size_t why_size);

typedef struct zen_param_row {
    const char *name; /* the full variable name, ZEN_... */
    zen_param_kind kind;
    unsigned flags;
    double lo, hi;             /* LONG, DOUBLE, FACTORS: inclusive bounds */
    const char *const *words;  /* CHOICE, LIST, FACTORS: NULL-terminated, canonical spelling */
    zen_param_validator check; /* STRING */
    const char *default_value;
    const char *description;
} zen_param_row;

size_t zen__param_rows(void);
const zen_param_row *zen__param_row_at(size_t index);
/* The row of ZEN_<name>, NULL when there is none. */
const zen_param_row *zen__param_row(const char *name);

/* NULL when v is acceptable for row; else why not (static text, or written into why). */
const char *zen__param_problem(const zen_param_row *row, const char *v, char *why, size_t n);

/* Parsers of a whole string (no blank, no trailing text): 0 and *out, else -1 (parse_long: -2
 * for a decimal integer past a long's range). */
int zen__param_parse_long(const char *v, long *out);
int zen__param_parse_double(const char *v, double *out);
int zen__param_parse_u64(const char *v, uint64_t *out);

/* The word of a CHOICE row in its table spelling ("" for none), any other row's text as it is. */
const char *zen__param_canonical(const zen_param_row *row, const char *v);

/* The text in effect for row: the environment's when the checks pass it, else the default. When
 * the environment's was rejected and nobody was told yet in this process, warning gets the
 * sentence to log (else ""). Logs nothing itself. */
const char *zen__param_value(const zen_param_row *row, char *warning, size_t n);

/* The same warning for ZEN_<name>: 1 when there is one to give (then it counts as given). */
int zen__param_warning(const char *name, char *warning, size_t n);

/* STRING validators (tunables_value.c). */
const char *zen__param_check_host(const char *v, char *why, size_t n);
const char *zen__param_check_host_id(const char *v, char *why, size_t n);
const char *zen__param_check_path(const char *v, char *why, size_t n);
const char *zen__param_check_secret(const char *v, char *why, size_t n);
const char *zen__param_check_fault(const char *v, char *why, size_t n);
/* A name: 1..31 of [A-Za-z0-9+_-] (what it names is checked by its reader). */
const char *zen__param_check_word(const char *v, char *why, size_t n);

#endif
