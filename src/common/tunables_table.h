/* The rows of the tunables table (tunables.c) and their checks (tunables_check.c). */
#ifndef ZEN_COMMON_TUNABLES_TABLE_H
#define ZEN_COMMON_TUNABLES_TABLE_H

#include <stddef.h>

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

/* STRING validators. */
const char *zen__param_check_host(const char *v, char *why, size_t n);
const char *zen__param_check_host_id(const char *v, char *why, size_t n);
const char *zen__param_check_path(const char *v, char *why, size_t n);
const char *zen__param_check_secret(const char *v, char *why, size_t n);
const char *zen__param_check_fault(const char *v, char *why, size_t n);

#endif
