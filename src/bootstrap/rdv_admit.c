/* Admission to a rendezvous listener and the drop-warning limiter (rdv_admit.h has the rules). */
#include "bootstrap/rdv_admit.h"

/* Oldest entry of stage `stage` (whose stage time is at least min_age old) among pd, limited
 * to source src unless any_src; -1 if none. */
static int oldest(const zen_rdv_pending *pd, int npd, uint32_t src, int any_src, int stage,
                  int64_t min_age, int64_t now)
{
    int best = -1;
    for (int i = 0; i < npd; i++) {
        if ((!any_src && pd[i].src != src) || pd[i].stage != stage || now - pd[i].since < min_age)
            continue;
        if (best < 0 || pd[i].since < pd[best].since)
            best = i;
    }
    return best;
}

int zen__rdv_admit(const zen_rdv_pending *pd, int npd, uint32_t src, int64_t now)
{
    int same = 0;
    for (int i = 0; i < npd; i++)
        same += pd[i].src == src;
    int any_src;
    if (same >= ZEN_RDV_PER_SOURCE)
        any_src = 0;
    else if (npd >= ZEN_RDV_MAX_PENDING)
        any_src = 1;
    else
        return ZEN_RDV_ADMIT_ROOM;
    int v = oldest(pd, npd, src, any_src, 0, 0, now);
    if (v < 0)
        v = oldest(pd, npd, src, any_src, 1, ZEN_RDV_GRACE_NS, now);
    return v >= 0 ? v : ZEN_RDV_ADMIT_REFUSE;
}

int zen__rdv_warn_due(zen_rdv_warn_limit *w, int64_t now, long *quiet)
{
    w->total++;
    if (w->total > 1 && now < w->next) {
        w->unlogged++;
        w->quiet++;
        return 0;
    }
    w->next = now + w->interval_ns;
    *quiet = w->quiet;
    w->quiet = 0;
    return 1;
}
