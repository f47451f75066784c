/*
 * Straggler emulation settings: the RANK:FACTOR / profile parser used by the CLI, the policy
 * name parsers, and the rotation rule (entry rank + step / slow_rotate, mod tp).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tp/tp_internal.h"

static int parse_factor(const char *s, char **end, double *out)
{
    errno = 0;
    double f = strtod(s, end);
    if (*end == s || errno != 0 || !(f >= 1.0) || f > 1e6)
        return -1;
    *out = f;
    return 0;
}

static zen_status parse_profile(const char *s, int tp, zen_tp_options *opts)
{
    double prof[ZEN_TP_MAX_SLOW];
    int k = 0;
    for (;;) {
        char *end;
        if (k == ZEN_TP_MAX_SLOW || parse_factor(s, &end, &prof[k]) != 0)
            return ZEN_EINVAL;
        k++;
        if (*end == '\0')
            break;
        if (*end != ',')
            return ZEN_EINVAL;
        s = end + 1;
    }
    int n = 0;
    zen_tp_slow tmp[ZEN_TP_MAX_SLOW];
    for (int r = 0; r < tp && r < ZEN_TP_MAX_SLOW; r++) {
        double f = prof[(size_t)r * (size_t)k / (size_t)tp];
        if (f > 1.0) {
            tmp[n].rank = r;
            tmp[n].factor = f;
            n++;
        }
    }
    memcpy(opts->slow, tmp, (size_t)n * sizeof tmp[0]);
    opts->nslow = n;
    return ZEN_OK;
}

zen_status zen_tp_parse_slow(const char *spec, int tp, zen_tp_options *opts)
{
    if (!opts || tp <= 0)
        return ZEN_EINVAL;
    if (!spec || !*spec || strcmp(spec, "none") == 0) {
        opts->nslow = 0;
        return ZEN_OK;
    }
    if (strncmp(spec, "profile:", 8) == 0)
        return parse_profile(spec + 8, tp, opts);
    zen_tp_slow tmp[ZEN_TP_MAX_SLOW];
    int n = 0;
    const char *s = spec;
    for (;;) {
        char *end;
        errno = 0;
        long r = strtol(s, &end, 10);
        if (end == s || errno != 0 || *end != ':' || r < 0 || r >= tp || n == ZEN_TP_MAX_SLOW)
            return ZEN_EINVAL;
        s = end + 1;
        if (parse_factor(s, &end, &tmp[n].factor) != 0)
            return ZEN_EINVAL;
        tmp[n].rank = (int)r;
        n++;
        if (*end == '\0')
            break;
        if (*end != ',')
            return ZEN_EINVAL;
        s = end + 1;
    }
    memcpy(opts->slow, tmp, (size_t)n * sizeof tmp[0]);
    opts->nslow = n;
    return ZEN_OK;
}

static const char *const balance_names[] = { "none", "resize", "migrate", "semi" };
static const char *const priority_names[] = { "score", "random", "prefix" };
static const char *const slow_mode_names[] = { "sleep", "spin" };

static int lookup(const char *name, const char *const *names, int count)
{
    for (int i = 0; name && i < count; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

zen_status zen_tp_parse_balance(const char *name, zen_tp_balance *out)
{
    int i = lookup(name, balance_names, 4);
    if (i < 0 || !out)
        return ZEN_EINVAL;
    *out = (zen_tp_balance)i;
    return ZEN_OK;
}

zen_status zen_tp_parse_priority(const char *name, zen_tp_priority *out)
{
    int i = lookup(name, priority_names, 3);
    if (i < 0 || !out)
        return ZEN_EINVAL;
    *out = (zen_tp_priority)i;
    return ZEN_OK;
}

zen_status zen_tp_parse_slow_mode(const char *name, zen_tp_slow_mode *out)
{
    int i = lookup(name, slow_mode_names, 2);
    if (i < 0 || !out)
        return ZEN_EINVAL;
    *out = (zen_tp_slow_mode)i;
    return ZEN_OK;
}

const char *zen_tp_balance_name(zen_tp_balance balance)
{
    if ((int)balance < 0 || (int)balance > 3)
        return "?";
    return balance_names[balance];
}

double zen__tp_slow_factor(const zen_tp_options *o, int size, int rank, uint64_t step)
{
    double f = 1.0;
    uint64_t shift = o->slow_rotate > 0 ? step / (uint64_t)o->slow_rotate : 0;
    for (int i = 0; i < o->nslow && i < ZEN_TP_MAX_SLOW; i++) {
        int r = (int)(((uint64_t)o->slow[i].rank + shift) % (uint64_t)size);
        if (r == rank && o->slow[i].factor > f)
            f = o->slow[i].factor;
    }
    return f;
}
