/*
 * Checks and typed getters of the tunables table. A value is parsed completely (no trailing
 * text, no leading blank, no ERANGE) and compared with the row's bounds before any reader sees
 * it; a getter parses again what it returns (the environment may change between calls, and a
 * tunable is read where it is used), so no reader converts a string the table has not passed.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/fault_spec.h"
#include "common/log.h"
#include "common/tunables.h"
#include "common/tunables_table.h"

/* Longest secret accepted in ZEN_JOB_SECRET: the limit of ZEN_JOB_SECRET_FILE
 * (ZEN_AUTH_SECRET_MAX in bootstrap/auth.h). */
#define SECRET_MAX 4096

static int parse_long(const char *v, long *out)
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

static int parse_double(const char *v, double *out)
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

static int parse_u64(const char *v, uint64_t *out)
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
    if (parse_double(v, &d) != 0 || !(d > 0))
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
            if (parse_double(num, &f) != 0 || f < row->lo || f > row->hi) {
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
        int st = parse_long(v, &l);
        if (st == -1)
            return "not a decimal integer";
        if (st == -2 || (double)l < row->lo || (double)l > row->hi) {
            snprintf(why, n, "outside [%.0f, %.0f]", row->lo, row->hi);
            return why;
        }
        return NULL;
    }
    case PK_DOUBLE:
        if (parse_double(v, &d) != 0)
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
        return parse_u64(v, &u) == 0 ? NULL : "not a decimal 64-bit number";
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

/* One warning per variable and process: the readers ask again on every call. */
static atomic_uchar warned[512];

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

/* The same, and a rejected value is warned about once per variable (a secret is never quoted). */
static const char *value_of(const zen_param_row *row)
{
    char why[160];
    const char *bad;
    const char *v = value_quiet(row, &bad, why, sizeof why);
    size_t i = (size_t)(row - zen__param_row_at(0));
    if (bad && i < sizeof warned && !atomic_exchange(&warned[i], 1))
        ZEN_WARN("init", "ignoring %s='%s' (%s); using the default '%s'", row->name,
                 (row->flags & PF_SECRET) ? "(hidden)" : getenv(row->name), bad,
                 row->default_value);
    return v;
}

static const zen_param_row *row_of_kind(const char *name, zen_param_kind kind, int strict_ok)
{
    const zen_param_row *row = zen__param_row(name);
    int kind_ok = row && (row->kind == kind || (kind == PK_STRING && row->kind >= PK_CHOICE));
    if (kind_ok && (strict_ok || !(row->flags & PF_STRICT)))
        return row;
    ZEN_ERROR("init", "bug: ZEN_%s read with the wrong getter or not in the tunables table", name);
    return NULL;
}

long zen__param_long(const char *name)
{
    const zen_param_row *row = row_of_kind(name, PK_LONG, 0);
    long v = 0;
    if (row && parse_long(value_of(row), &v) != 0)
        v = (long)row->lo; /* an unparsable default: a bug the tests catch */
    return v;
}

double zen__param_double(const char *name)
{
    const zen_param_row *row = row_of_kind(name, PK_DOUBLE, 0);
    double v = 0;
    if (row && parse_double(value_of(row), &v) != 0)
        v = row->lo;
    return v;
}

double zen__param_timeout(const char *name)
{
    const zen_param_row *row = row_of_kind(name, PK_TIMEOUT, 0);
    double s = 300;
    if (row && zen__param_parse_timeout(value_of(row), &s) != 0)
        s = 300;
    return s;
}

int zen__param_u64(const char *name, uint64_t *out)
{
    const zen_param_row *row = row_of_kind(name, PK_U64, 0);
    return row && parse_u64(value_of(row), out) == 0;
}

/* The word of a CHOICE row in its table spelling, any other text as it is. */
static const char *canonical(const zen_param_row *row, const char *v)
{
    if (row->kind != PK_CHOICE)
        return v;
    const char *word = find_word(row->words, v, strlen(v));
    return word ? word : "";
}

const char *zen__param_str(const char *name)
{
    const zen_param_row *row = row_of_kind(name, PK_STRING, 0);
    return row ? canonical(row, value_of(row)) : "";
}

const char *zen__param_quiet(const char *name, int *ignored)
{
    const zen_param_row *row = zen__param_row(name);
    char why[160];
    const char *bad = NULL;
    const char *v = row && row->kind >= PK_CHOICE
                        ? canonical(row, value_quiet(row, &bad, why, sizeof why))
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
    if (bad || parse_long(v, out) != 0) {
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

/* A host name or dotted IPv4 address: letters, digits, '.', '-', '_', at most 253 long. */
const char *zen__param_check_host(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    size_t len = strlen(v);
    if (len > 253)
        return "longer than a host name can be (253)";
    if (*v == '-' || *v == '.')
        return "not a host name or IPv4 address (starts with '-' or '.')";
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
            return "not a host name or IPv4 address";
    struct in_addr a;
    int dotted = strspn(v, "0123456789.") == len;
    if (dotted && inet_pton(AF_INET, v, &a) != 1)
        return "not an IPv4 address";
    return NULL;
}

/* Printable, no blank, shorter than ZEN_HOST_ID_MAX (128, bootstrap/hosts.h). */
const char *zen__param_check_host_id(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    if (strlen(v) >= 128)
        return "longer than 127 characters";
    for (const char *p = v; *p; p++)
        if (!isgraph((unsigned char)*p))
            return "has a blank or a control character";
    return NULL;
}

/* A path: its file is checked where it is opened (type, size); here only its length. */
const char *zen__param_check_path(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    return strlen(v) >= 4096 ? "longer than a path can be (4095)" : NULL;
}

const char *zen__param_check_secret(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    return strlen(v) > SECRET_MAX ? "longer than 4096 bytes" : NULL;
}

const char *zen__param_check_fault(const char *v, char *why, size_t n)
{
    zen_fault_config cfg;
    return zen__fault_spec_parse(v, &cfg, why, n) == 0 ? NULL : why;
}
