/*
 * A free TCP port for a local job's rendezvous, shared by `zen launch` and the multi-process
 * tcp tests (tests/CMakeLists.txt compiles free_port.c into the test helper library).
 */
#ifndef ZEN_TOOLS_FREE_PORT_H
#define ZEN_TOOLS_FREE_PORT_H

/*
 * A port that a listener could bind on all addresses just now, chosen at random outside the
 * kernel's ephemeral range; -1 when none is found in 200 tries. Not reserved: another process
 * may still take it before the caller binds. Thread-safe only in the sense that concurrent
 * callers may get the same port (the sequence counter is not atomic).
 */
int zen_free_port(void);

#endif
