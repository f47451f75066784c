/*
 * The tunables registry. Every ZEN_* environment variable the library reads is a row of the table
 * in tunables.c (name without the ZEN_ prefix, default, description), so `zen info` can list them
 * all. Reading a name that is not in the table is a bug and returns the fallback given here.
 */
#ifndef ZEN_COMMON_TUNABLES_H
#define ZEN_COMMON_TUNABLES_H

/* Value of ZEN_<name> from the environment, else the table default. Never NULL for a known name. */
const char *zen_param_str(const char *name);
long zen_param_long(const char *name);
double zen_param_double(const char *name);

#endif
