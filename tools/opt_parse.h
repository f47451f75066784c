/*
 * One parser per option concept, shared by every zen command, so a spelling means the same
 * thing everywhere and is refused the same way everywhere. The other concepts live in cli.h:
 * sizes with K/M/G suffixes (zen_parse_size), durations and fractions (zen_parse_double).
 * Sparse scheme names are the library's (zen_sparse_scheme_parse: "auto" is the AUTO scheme).
 */
#ifndef ZEN_TOOLS_OPT_PARSE_H
#define ZEN_TOOLS_OPT_PARSE_H

#include <zen/zen.h>

/* The spellings of --transport, for help texts and error messages. */
#define ZEN_OPT_TRANSPORTS "auto, inproc, shm, tcp, shm+tcp or mpi"

/*
 * --transport: "auto" is ZEN_TRANSPORT_AUTO, the library's choice: the ranks are threads of this
 * process unless a launcher started it; under mpirun they use mpi, under zen launch what
 * ZEN_TRANSPORT says (zen launch --transport sets it), by default shared memory among the ranks
 * of a host and tcp across hosts. "shm+tcp" asks for that last one explicitly
 * (ZEN_TRANSPORT_MIXED); "inproc", "shm", "tcp" and "mpi" name one transport. Returns 0 with
 * *out set, -1 for any other spelling (case matters, as for every option value).
 */
int zen_opt_transport(const char *s, zen_transport_kind *out);

/* What a command runs with for kind: ZEN_TRANSPORT_AUTO outside a launcher is inproc threads. */
zen_transport_kind zen_opt_transport_resolve(zen_transport_kind kind);

/* Print "zen CMD: bad value 'S' for --transport: ..." naming the spellings; returns exit 2. */
int zen_opt_transport_error(const char *cmd, const char *s);

/*
 * A count (ranks, iterations, a port, a seed): a whole number in [lo, hi], written in decimal
 * (40000000) or as a whole floating-point number (4e7). Returns 0 with *out set, -1 otherwise
 * (empty, trailing characters, a fraction, out of range).
 */
int zen_parse_long(const char *s, long lo, long hi, long *out);

#endif
