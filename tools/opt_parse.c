/* The shared option parsers of opt_parse.h. */
#include "opt_parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The names come from the library (zen_transport_name), so a transport added to its table is a
 * --transport word with no edit here. Kinds are small enum values (include/zen/zen.h). */
int zen_opt_transport(const char *s, zen_transport_kind *out)
{
    for (int k = ZEN_TRANSPORT_AUTO; s && strcmp(s, "?") != 0 && k < 64; k++) {
        if (strcmp(s, zen_transport_name((zen_transport_kind)k)) == 0) { /* "?": no such kind */
            *out = (zen_transport_kind)k;
            return 0;
        }
    }
    return -1;
}

zen_transport_kind zen_opt_transport_resolve(zen_transport_kind kind)
{
    if (kind == ZEN_TRANSPORT_AUTO && !zen_cli_launched())
        return ZEN_TRANSPORT_INPROC;
    return kind;
}

int zen_opt_transport_error(const char *cmd, const char *s)
{
    return zen_usage_error(cmd, "bad value '%s' for --transport: use " ZEN_OPT_TRANSPORTS, s);
}

int zen_parse_long(const char *s, long lo, long hi, long *out)
{
    /* decimal only: strtod would also read hex (0x10) and inf */
    if (!s || !*s || s[strspn(s, "0123456789+-eE.")] != '\0')
        return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0' || errno == ERANGE) {
        /* 4e7: a whole number written as a float, exact below 2^53 */
        double d;
        if (zen_parse_whole(s, -9007199254740992.0, 9007199254740992.0, &d) != 0)
            return -1;
        v = (long long)d;
    }
    if (v < lo || v > hi)
        return -1;
    *out = (long)v;
    return 0;
}
