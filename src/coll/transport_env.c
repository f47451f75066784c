/*
 * ZEN_TRANSPORT against the registry. The tunables table (common, below transport) cannot see
 * the transports, so its row takes any word; this file, which can, gives the word its meaning and
 * answers zen_param_get for the row as the table does for its own checks: a word that names no
 * process transport is "ignored", with the list of those that exist. A new transport is thus a
 * row of the registry and nothing here.
 */
#include "coll/transport_env.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/tunables.h"
#include "transport/registry.h"

/* The process transport named v (any case; "auto": shm+tcp), or NULL. */
static const zen_transport_desc *process_transport(const char *v)
{
    char low[32];
    size_t n = 0;
    for (; v[n] && n + 1 < sizeof low; n++)
        low[n] = (char)tolower((unsigned char)v[n]);
    low[n] = '\0';
    if (v[n]) /* longer than any name */
        return NULL;
    const zen_transport_desc *d = strcmp(low, "auto") == 0
                                      ? zen__transport_desc(ZEN_TRANSPORT_MIXED)
                                      : zen__transport_named(low);
    return d && d->traits.reach >= ZEN_REACH_HOST ? d : NULL;
}

/* "not auto or a process transport (tcp, shm, ...)", listed from the registry. */
static const char *problem_text(void)
{
    static _Thread_local char why[160];
    size_t len = (size_t)snprintf(why, sizeof why, "not auto or a process transport (");
    for (size_t i = 0, k = 0; i < zen__transport_count() && len < sizeof why; i++) {
        const zen_transport_desc *d = zen__transport_at(i);
        if (d->open && d->traits.reach >= ZEN_REACH_HOST)
            len += (size_t)snprintf(why + len, sizeof why - len, "%s%s", k++ ? ", " : "", d->name);
    }
    if (len < sizeof why)
        snprintf(why + len, sizeof why - len, ")");
    return why;
}

zen_transport_kind zen__coll_transport_from_env(void)
{
    static atomic_int warned;
    const char *v = zen__param_str("TRANSPORT"); /* a word, or the default "auto" */
    const zen_transport_desc *d = process_transport(*v ? v : "auto");
    if (d)
        return d->kind;
    if (atomic_exchange(&warned, 1) == 0)
        ZEN_WARN("init", "ZEN_TRANSPORT='%s' ignored (%s); using auto", v, problem_text());
    return ZEN_TRANSPORT_MIXED;
}

zen_status zen_param_get(size_t index, zen_param_info *info)
{
    zen_status st = zen__param_info_at(index, info);
    if (st != ZEN_OK || strcmp(info->name, "ZEN_TRANSPORT") != 0 ||
        strcmp(info->source, "env") != 0 || process_transport(info->value))
        return st;
    info->raw_value = info->value;
    info->value = info->default_value;
    info->source = "ignored";
    info->problem = problem_text();
    return ZEN_OK;
}
