/*
 * The table of ZEN_SPARSE_SCHEMES (registry.h), indexed by the enum, and the scheme names of the
 * public API. The table is built from the list, so its rows, the declarations of the schemes'
 * functions and the count check below cannot disagree.
 */
#include "sparse/scheme/registry.h"

#include <stddef.h>
#include <strings.h>

#define ZEN_SPARSE_SCHEME_ROW(ID, name_, prefer_)           \
    [ZEN_SPARSE_##ID] = { .name = #name_,                   \
                          .id = ZEN_SPARSE_##ID,            \
                          .run = zen__sparse_run_##name_,   \
                          .cost = zen__sparse_cost_##name_, \
                          .prefer = (prefer_) },

const zen_sparse_scheme_desc zen__sparse_schemes[] = {
    [ZEN_SPARSE_AUTO] = { .name = "auto", .id = ZEN_SPARSE_AUTO, .prefer = -1 },
    ZEN_SPARSE_SCHEMES(ZEN_SPARSE_SCHEME_ROW)
};

/* A value of zen_sparse_scheme without its row (or a row beyond the enum) fails the build. */
#define ZEN_SPARSE_SCHEME_ONE(ID, name, prefer) +1
_Static_assert(sizeof zen__sparse_schemes / sizeof zen__sparse_schemes[0] ==
                   ZEN_SPARSE_SCHEME_COUNT,
               "zen_sparse_scheme and the registry rows disagree");
_Static_assert(1 ZEN_SPARSE_SCHEMES(ZEN_SPARSE_SCHEME_ONE) == ZEN_SPARSE_SCHEME_COUNT,
               "every zen_sparse_scheme but AUTO needs exactly one registry row");

const zen_sparse_scheme_desc *zen__sparse_scheme_row(zen_sparse_scheme s)
{
    if ((unsigned)s >= ZEN_SPARSE_SCHEME_COUNT || s == ZEN_SPARSE_AUTO)
        return NULL;
    return &zen__sparse_schemes[s];
}

const char *zen_sparse_scheme_name(zen_sparse_scheme scheme)
{
    return (unsigned)scheme < ZEN_SPARSE_SCHEME_COUNT ? zen__sparse_schemes[scheme].name : "?";
}

zen_status zen_sparse_scheme_parse(const char *name, zen_sparse_scheme *out)
{
    if (!name || !out)
        return ZEN_EINVAL;
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        if (strcasecmp(name, zen__sparse_schemes[s].name) == 0) {
            *out = (zen_sparse_scheme)s;
            return ZEN_OK;
        }
    }
    if (strcasecmp(name, "zen") == 0) { /* the paper's name for BALANCED */
        *out = ZEN_SPARSE_BALANCED;
        return ZEN_OK;
    }
    return ZEN_EINVAL;
}
