/*
 * Names of the tp policies (ZEN_TP_PRIORITY is read by group.c) and straggler emulation (tests,
 * benchmarks): the group's emulation setter and the rotation rule (entry rank + step / rotate,
 * mod tp). The string forms of the CLI are parsed in
 * tools/tp_emulation.c; the library takes only the struct.
 */
#include <string.h>

#include "coll/comm_internal.h"
#include "common/options.h"
#include "tp/tp_internal.h"

static const char *const balance_names[] = { "none", "resize", "migrate", "semi" };

const char *zen_tp_balance_name(zen_tp_balance balance)
{
    if ((int)balance < 0 || (int)balance > 3)
        return "?";
    return balance_names[balance];
}

zen_status zen__tp_parse_priority(const char *name, zen_tp_priority *out)
{
    static const char *const names[] = { "score", "random", "prefix" };
    for (int i = 0; name && out && i < 3; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (zen_tp_priority)i;
            return ZEN_OK;
        }
    return ZEN_EINVAL;
}

void zen_tp_emulation_init(zen_tp_emulation *e)
{
    if (e)
        *e = (zen_tp_emulation)ZEN_TP_EMULATION_INIT;
}

static zen_status check_emulation(zen_comm *comm, const zen_tp_emulation *e)
{
    if (!ZEN_OPTIONS_SIZE_OK(e))
        return zen__fail(comm, ZEN_EINVAL, "tp: zen_tp_emulation.size %zu is not this zen's (%zu)",
                         e->size, sizeof *e);
    if ((int)e->mode < 0 || (int)e->mode > 1)
        return zen__fail(comm, ZEN_EINVAL, "tp: unknown slow mode %d", (int)e->mode);
    if (e->rotate < 0 || e->nslow < 0 || e->nslow > ZEN_TP_MAX_SLOW)
        return zen__fail(comm, ZEN_EINVAL, "tp: bad emulation (rotate %d, nslow %d)", e->rotate,
                         e->nslow);
    for (int i = 0; i < e->nslow; i++)
        if (e->slow[i].rank < 0 || e->slow[i].rank >= zen_comm_size(comm) ||
            !(e->slow[i].factor >= 1.0))
            return zen__fail(comm, ZEN_EINVAL, "tp: bad straggler %d:%g for tp size %d",
                             e->slow[i].rank, e->slow[i].factor, zen_comm_size(comm));
    return ZEN_OK;
}

zen_status zen_tp_group_set_emulation(zen_tp_group *g, const zen_tp_emulation *e)
{
    if (!g)
        return ZEN_EINVAL;
    zen_tp_emulation none = ZEN_TP_EMULATION_INIT;
    if (!e)
        e = &none;
    zen_status st = check_emulation(g->comm, e);
    if (st != ZEN_OK)
        return st;
    g->emu = *e;
    g->emu.size = sizeof g->emu;
    g->slow_factor = zen__tp_slow_factor(&g->emu, g->size, g->rank, g->steps);
    return ZEN_OK;
}

double zen__tp_slow_factor(const zen_tp_emulation *e, int size, int rank, uint64_t step)
{
    double f = 1.0;
    uint64_t shift = e->rotate > 0 ? step / (uint64_t)e->rotate : 0;
    for (int i = 0; i < e->nslow && i < ZEN_TP_MAX_SLOW; i++) {
        int r = (int)(((uint64_t)e->slow[i].rank + shift) % (uint64_t)size);
        if (r == rank && e->slow[i].factor > f)
            f = e->slow[i].factor;
    }
    return f;
}
