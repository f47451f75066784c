/*
 * The tunables registry. Every ZEN_* environment variable the library reads is a row of the table
 * in tunables.c (name without the ZEN_ prefix, default, description), so `zen info` can list them
 * all. Reading a name that is not in the table is a bug and returns the fallback given here.
 */
#ifndef ZEN_COMMON_TUNABLES_H
#define ZEN_COMMON_TUNABLES_H

/* Value of ZEN_<name> from the environment, else the table default. Never NULL for a known name. */
const char *zen__param_str(const char *name);
long zen__param_long(const char *name);
double zen__param_double(const char *name);

/* A malformed or out-of-range value is ignored with one warning per variable (the default is
 * used instead) and `zen info` shows it as "ignored" with the reason. */

/* Seconds at and above which a timeout means "no deadline": converting more to int64 ns would
 * overflow (2^63 ns is 292 years). */
#define ZEN_TIMEOUT_NONE_S 1e9

/* Parses a timeout: a positive number of seconds, or inf/infinity/none (no deadline, returned as
 * INFINITY; so is any value >= ZEN_TIMEOUT_NONE_S). 0 on success, -1 if malformed. */
int zen__param_parse_timeout(const char *v, double *seconds);

/* A timeout tunable in seconds, INFINITY for none. */
double zen__param_timeout(const char *name);

#endif
