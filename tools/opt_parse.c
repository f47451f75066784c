/* The shared option parsers of opt_parse.h. */
#include "opt_parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    zen_transport_kind kind;
} transports[] = {
    { "auto", ZEN_TRANSPORT_AUTO },     { "inproc", ZEN_TRANSPORT_INPROC },
    { "shm", ZEN_TRANSPORT_SHM },       { "tcp", ZEN_TRANSPORT_TCP },
    { "shm+tcp", ZEN_TRANSPORT_MIXED }, { "mpi", ZEN_TRANSPORT_MPI },
};

int zen_opt_transport(const char *s, zen_transport_kind *out)
{
    for (size_t i = 0; s && i < sizeof transports / sizeof transports[0]; i++) {
        if (strcmp(s, transports[i].name) == 0) {
            *out = transports[i].kind;
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
