/*
 * The tunables registry. Every ZEN_* environment variable zen reads is one row of the table in
 * tunables.c: its name, its kind (long, double, timeout, u64, choice, list, factors, or a string
 * with a validator), its bounds, its default and a description. `zen info` lists the rows.
 *
 * Readers take a value only through the getter of the row's kind, which returns a value within
 * the row's bounds: an unset or empty variable gives the default; a malformed or out-of-range
 * one is ignored with one warning per variable and the default is used (`zen info` shows it as
 * "ignored" with the reason). Rows marked strict (the rank identity, master address and port,
 * the job secret, ZEN_REQUIRE_SECRET, ZEN_SOCKET_IFADDR) are not defaulted: a wrong rank or a
 * dropped secret would not be a harmless fallback, so their readers refuse to start instead
 * (zen__param_strict), and `zen info` shows "refused".
 *
 * Names are given without the ZEN_ prefix. Reading a name that is not in the table, or with the
 * getter of another kind, is a bug: it is logged as an error and returns 0 / "".
 */
#ifndef ZEN_COMMON_TUNABLES_H
#define ZEN_COMMON_TUNABLES_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

/* long rows: a decimal integer within the row's bounds. */
long zen__param_long(const char *name);

/* double rows: a finite number within the row's bounds (never NaN or inf). */
double zen__param_double(const char *name);

/* timeout rows: seconds > 0, or INFINITY for none. */
double zen__param_timeout(const char *name);

/* u64 rows: 1 and *out when a decimal 64-bit value is set, else 0 (the default is "unset"). */
int zen__param_u64(const char *name, uint64_t *out);

/* choice rows: the canonical (table) spelling of the word chosen, whatever case it was given in.
 * list, factors and string rows: the checked text ("" when unset). Never NULL. */
const char *zen__param_str(const char *name);

/* The same without the warning, for the logger's own settings (a warning from inside the
 * logger's initialisation would wait for itself); *ignored: the environment's value was
 * rejected (its reader then gives zen__param_warning's sentence once the logger is up). */
const char *zen__param_quiet(const char *name, int *ignored);

/* strict rows: 1 with *value when set and well-formed, 0 when unset (*value: the default), -1
 * when malformed (why says which variable and why; a secret's value is never quoted). */
int zen__param_strict(const char *name, const char **value, char *why, size_t why_size);

/* A long value v given under another name for the same thing (RANK, OMPI_COMM_WORLD_RANK for
 * ZEN_RANK): checked against the row's bounds. 0 with *out, or -1 with the reason in why. */
int zen__param_check_long(const char *name, const char *v, long *out, char *why, size_t why_size);

/* Any value v given for ZEN_<name> (or an alias of it): NULL when the row accepts it, else why
 * not (static text, or written into why). */
const char *zen__param_check(const char *name, const char *v, char *why, size_t why_size);

/* zen_param_get's answer as far as the table can tell (the communicator's zen_param_get adds the
 * checks of the layers above, e.g. that ZEN_TRANSPORT names a transport of the registry). */
zen_status zen__param_info_at(size_t index, zen_param_info *info);

/* Seconds at and above which a timeout means "no deadline": converting more to int64 ns would
 * overflow (2^63 ns is 292 years). */
#define ZEN_TIMEOUT_NONE_S 1e9

/* Parses a timeout: a positive number of seconds, or inf/infinity/none (no deadline, returned as
 * INFINITY; so is any value >= ZEN_TIMEOUT_NONE_S). 0 on success, -1 if malformed. */
int zen__param_parse_timeout(const char *v, double *seconds);

#endif
