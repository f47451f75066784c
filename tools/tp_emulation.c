/*
 * The command-line forms of tp balancing and straggler emulation (see tp_emulation.h).
 */
#include "tp_emulation.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int parse_factor(const char *s, char **end, double *out)
{
    errno = 0;
    double f = strtod(s, end);
    if (*end == s || errno != 0 || !(f >= 1.0) || f > 1e6)
        return -1;
    *out = f;
    return 0;
}

static zen_status parse_profile(const char *s, int tp, zen_tp_emulation *e)
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
    memcpy(e->slow, tmp, (size_t)n * sizeof tmp[0]);
    e->nslow = n;
    return ZEN_OK;
}

zen_status zen_cli_tp_parse_slow(const char *spec, int tp, zen_tp_emulation *e)
{
    if (!e || tp <= 0)
        return ZEN_EINVAL;
    if (!spec || !*spec || strcmp(spec, "none") == 0) {
        e->nslow = 0;
        return ZEN_OK;
    }
    if (strncmp(spec, "profile:", 8) == 0)
        return parse_profile(spec + 8, tp, e);
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
    memcpy(e->slow, tmp, (size_t)n * sizeof tmp[0]);
    e->nslow = n;
    return ZEN_OK;
}

static const char *const slow_mode_names[] = { "sleep", "spin" };

static int lookup(const char *name, const char *const *names, int count)
{
    for (int i = 0; name && i < count; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

zen_status zen_cli_tp_parse_balance(const char *name, zen_tp_balance *out)
{
    /* the names are the library's own (zen_tp_balance_name), so the two cannot drift */
    for (int i = ZEN_BALANCE_NONE; name && out && i <= ZEN_BALANCE_SEMI; i++)
        if (strcmp(name, zen_tp_balance_name((zen_tp_balance)i)) == 0) {
            *out = (zen_tp_balance)i;
            return ZEN_OK;
        }
    return ZEN_EINVAL;
}

zen_status zen_cli_tp_parse_slow_mode(const char *name, zen_tp_slow_mode *out)
{
    int i = lookup(name, slow_mode_names, 2);
    if (i < 0 || !out)
        return ZEN_EINVAL;
    *out = (zen_tp_slow_mode)i;
    return ZEN_OK;
}
