/*
 * Checks and typed getters of the tunables table. A value is parsed completely (no trailing
 * text, no leading blank, no ERANGE) and compared with the row's bounds before any reader sees
 * it; a getter parses again what it returns (the environment may change between calls, and a
 * tunable is read where it is used), so no reader converts a string the table has not passed.
 * Nothing here logs: the warning getters (tunables_get.c) and the logger (log.c, whose own
 * settings are tunables) write the warnings these functions word.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/tunables.h"
#include "common/tunables_table.h"

int zen__param_parse_long(const char *v, long *out)
{
    char *end;
    errno = 0;
    if (!*v || isspace((unsigned char)*v))
        return -1;
    long x = strtol(v, &end, 10);
    if (*end != '\0')
        return -1;
    if (errno == ERANGE)
        return -2; /* a decimal integer, past what a long holds */
    *out = x;
    return 0;
}

int zen__param_parse_double(const char *v, double *out)
{
    char *end;
    errno = 0;
    if (!*v || isspace((unsigned char)*v))
        return -1;
    double x = strtod(v, &end);
    if (*end != '\0' || errno == ERANGE || !isfinite(x))
        return -1;
    *out = x;
    return 0;
}

int zen__param_parse_u64(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*v < '0' || *v > '9') /* strtoull takes "-5" as 2^64 - 5 */
        return -1;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end != '\0' || errno == ERANGE)
        return -1;
    *out = (uint64_t)x;
    return 0;
}

int zen__param_parse_timeout(const char *v, double *seconds)
{
    if (strcasecmp(v, "inf") == 0 || strcasecmp(v, "infinity") == 0 || strcasecmp(v, "none") == 0) {
        *seconds = INFINITY;
        return 0;
    }
    double d;
    if (zen__param_parse_double(v, &d) != 0 || !(d > 0))
        return -1;
    *seconds = d >= ZEN_TIMEOUT_NONE_S ? INFINITY : d;
    return 0;
}

/* The canonical word of words that v names (any case), NULL when none; len: v's length. */
static const char *find_word(const char *const *words, const char *v, size_t len)
{
    for (; *words; words++)
        if (strlen(*words) == len && strncasecmp(*words, v, len) == 0)
            return *words;
    return NULL;
}

static const char *words_problem(const char *prefix, const char *const *words, char *why, size_t n)
{
    int k = snprintf(why, n, "%s", prefix);
    for (size_t i = 0; words[i] && k >= 0 && (size_t)k < n; i++)
        k += snprintf(why + k, n - (size_t)k, "%s%s", i ? "|" : "", words[i]);
    return why;
}

/* LIST (want_factor 0) and FACTORS (1): comma-separated items, none empty. */
static const char *items_problem(const zen_param_row *row, const char *v, int want_factor,
                                 char *why, size_t n)
{
    for (const char *item = v;;) {
        size_t len = strcspn(item, ",");
        size_t word = want_factor ? strcspn(item, "=,") : len;
        if (!find_word(row->words, item, word))
            return words_problem(want_factor ? "each item is NAME=FACTOR, NAME one of "
                                             : "each item one of ",
                                 row->words, why, n);
        if (want_factor) {
            char num[64];
            double f;
            size_t flen = len - word - (item[word] == '=');
            if (item[word] != '=' || flen >= sizeof num)
                return "an item has no =FACTOR";
            memcpy(num, item + word + 1, flen);
            num[flen] = '\0';
            if (zen__param_parse_double(num, &f) != 0 || f < row->lo || f > row->hi) {
                snprintf(why, n, "a factor is not a number in [%g, %g]", row->lo, row->hi);
                return why;
            }
        }
        if (!item[len])
            return NULL;
        item += len + 1;
    }
}

const char *zen__param_problem(const zen_param_row *row, const char *v, char *why, size_t n)
{
    long l;
    double d;
    uint64_t u;
    switch (row->kind) {
    case PK_LONG: {
        int st = zen__param_parse_long(v, &l);
        if (st == -1)
            return "not a decimal integer";
        if (st == -2 || (double)l < row->lo || (double)l > row->hi) {
            snprintf(why, n, "outside [%.0f, %.0f]", row->lo, row->hi);
            return why;
        }
        return NULL;
    }
    case PK_DOUBLE:
        if (zen__param_parse_double(v, &d) != 0)
            return "not a finite number";
        if (d < row->lo || d > row->hi) {
            snprintf(why, n, "outside [%g, %g]", row->lo, row->hi);
            return why;
        }
        return NULL;
    case PK_TIMEOUT:
        return zen__param_parse_timeout(v, &d) == 0 ? NULL
                                                    : "not a positive number of seconds or inf";
    case PK_U64:
        return zen__param_parse_u64(v, &u) == 0 ? NULL : "not a decimal 64-bit number";
    case PK_CHOICE:
        return find_word(row->words, v, strlen(v))
                   ? NULL
                   : words_problem("not one of ", row->words, why, n);
    case PK_LIST:
        return items_problem(row, v, 0, why, n);
    case PK_FACTORS:
        return items_problem(row, v, 1, why, n);
    case PK_STRING:
        return row->check ? row->check(v, why, n) : "no validator (a bug in the table)";
    }
    return "unknown kind (a bug in the table)";
}

/* The text in effect for row: the environment's when it passes the check, else the default
 * (*bad says why the environment's was rejected, NULL when it was not). */
static const char *value_quiet(const zen_param_row *row, const char **bad, char *why, size_t n)
{
    const char *env = getenv(row->name);
    *bad = NULL;
    if (!env || !*env)
        return row->default_value;
    *bad = zen__param_problem(row, env, why, n);
    return *bad ? row->default_value : env;
}

/* The word of a CHOICE row in its table spelling, any other text as it is. */
const char *zen__param_canonical(const zen_param_row *row, const char *v)
{
    if (row->kind != PK_CHOICE)
        return v;
    const char *word = find_word(row->words, v, strlen(v));
    return word ? word : "";
}

/* One warning per variable and process: the readers ask again on every call. */
static atomic_uchar warned[512];

const char *zen__param_value(const zen_param_row *row, char *warning, size_t n)
{
    char why[160];
    const char *bad;
    const char *v = value_quiet(row, &bad, why, sizeof why);
    size_t i = (size_t)(row - zen__param_row_at(0));
    warning[0] = '\0';
    if (bad && i < sizeof warned && !atomic_exchange(&warned[i], 1))
        snprintf(warning, n, "ignoring %s='%s' (%s); using the default '%s'", row->name,
                 (row->flags & PF_SECRET) ? "(hidden)" : getenv(row->name), bad,
                 row->default_value);
    return v;
}

int zen__param_warning(const char *name, char *warning, size_t n)
{
    const zen_param_row *row = zen__param_row(name);
    warning[0] = '\0';
    if (row)
        (void)zen__param_value(row, warning, n);
    return warning[0] != '\0';
}

const char *zen__param_quiet(const char *name, int *ignored)
{
    const zen_param_row *row = zen__param_row(name);
    char why[160];
    const char *bad = NULL;
    const char *v = row && row->kind >= PK_CHOICE
                        ? zen__param_canonical(row, value_quiet(row, &bad, why, sizeof why))
                        : "";
    *ignored = bad != NULL;
    return v;
}

int zen__param_strict(const char *name, const char **value, char *why, size_t why_size)
{
    const zen_param_row *row = zen__param_row(name);
    *value = row ? row->default_value : "";
    if (!row || !(row->flags & PF_STRICT)) {
        snprintf(why, why_size, "bug: ZEN_%s is not a strict tunable", name);
        return -1;
    }
    const char *env = getenv(row->name);
    if (!env || !*env)
        return 0;
    char detail[160];
    const char *bad = zen__param_problem(row, env, detail, sizeof detail);
    if (bad) {
        if (row->flags & PF_SECRET)
            snprintf(why, why_size, "%s is malformed: %s", row->name, bad);
        else
            snprintf(why, why_size, "%s='%s' is malformed: %s", row->name, env, bad);
        return -1;
    }
    *value = env;
    return 1;
}

int zen__param_check_long(const char *name, const char *v, long *out, char *why, size_t why_size)
{
    const zen_param_row *row = zen__param_row(name);
    char detail[160];
    const char *bad = !row || row->kind != PK_LONG
                          ? "bug: not a long tunable"
                          : zen__param_problem(row, v, detail, sizeof detail);
    if (bad || zen__param_parse_long(v, out) != 0) {
        snprintf(why, why_size, "%s", bad ? bad : "not a decimal integer");
        return -1;
    }
    return 0;
}

const char *zen__param_check(const char *name, const char *v, char *why, size_t why_size)
{
    const zen_param_row *row = zen__param_row(name);
    return row ? zen__param_problem(row, v, why, why_size) : "bug: not in the tunables table";
}
