/*
 * tp_emulation.h - the command-line forms of the tp balancing and straggler-emulation settings
 * (`zen train --balance/--slow/--slow-mode`, the tp tests). The library takes only
 * the structs of <zen/tp.h>; these parsers live with the CLI.
 */
#ifndef ZEN_TOOLS_TP_EMULATION_H
#define ZEN_TOOLS_TP_EMULATION_H

#include <zen/tp.h>

/*
 * Parse a straggler list for tp ranks into e->slow/nslow (replacing it). Accepted forms:
 *  "RANK:FACTOR,RANK:FACTOR,..."  e.g. "0:4" or "1:2,3:8" (rank < tp, factor >= 1);
 *  "profile:F0,F1,...,Fk-1"      a static profile over k slots scaled to tp: rank r gets
 *                                 F[r*k/tp], e.g. "profile:8,6,4,2,1,1,1,1" at tp 4 is 8,4,1,1;
 *  "" or "none"                   no straggler.
 * Returns ZEN_EINVAL (e unchanged) on a malformed list.
 */
zen_status zen_cli_tp_parse_slow(const char *spec, int tp, zen_tp_emulation *e);

/* "none|resize|migrate|semi", "sleep|spin". ZEN_EINVAL (out unchanged) for an unknown name. */
zen_status zen_cli_tp_parse_balance(const char *name, zen_tp_balance *out);
zen_status zen_cli_tp_parse_slow_mode(const char *name, zen_tp_slow_mode *out);

#endif
