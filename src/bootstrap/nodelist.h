/*
 * Slurm's compressed lists, parsed as pure functions (no environment, no allocation) so that a
 * unit test and a fuzzer can drive them with any bytes:
 *
 *  - a hostlist (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST): comma-separated items, each a host
 *    name with up to ZEN_NODELIST_GROUPS bracket groups of numbers and ranges, e.g.
 *    "node[01-03,07],gpu-a[1-2]" is node01 node02 node03 node07 gpu-a1 gpu-a2 and
 *    "r[1-2]n[1-2]" is r1n1 r1n2 r2n1 r2n2 (the last group varies fastest). A range keeps the
 *    width of its first number ("[08-10]": 08 09 10).
 *  - a tasks-per-node list (SLURM_STEP_TASKS_PER_NODE): "2(x3),1" is 2 tasks on each of the
 *    first three nodes and 1 on the fourth.
 *
 * Malformed input is an error with a reason naming the character, never an assert: the strings
 * come from the environment.
 */
#ifndef ZEN_BOOTSTRAP_NODELIST_H
#define ZEN_BOOTSTRAP_NODELIST_H

#include <stddef.h>

#include <zen/zen.h>

#define ZEN_NODELIST_GROUPS    8          /* bracket groups in one item */
#define ZEN_NODELIST_HOST_MAX  255        /* characters of one expanded host name */
#define ZEN_NODELIST_COUNT_MAX (1L << 24) /* hosts in a list: more than any cluster has */

/*
 * Host number index (0-based) of hostlist list into out (cap bytes, NUL-terminated) and the
 * number of hosts into *count. The whole list is checked even for index 0. index >= *count
 * leaves out empty and is not an error. ZEN_EINVAL with a reason in why (why_cap bytes) when list
 * is NULL, empty or malformed, when the host asked for is longer than ZEN_NODELIST_HOST_MAX or
 * cap - 1, or when the list names more than ZEN_NODELIST_COUNT_MAX hosts; out is then empty and
 * *count 0.
 */
zen_status zen__nodelist_host(const char *list, long index, char *out, size_t cap, long *count,
                              char *why, size_t why_cap);

/*
 * Tasks on node number node (0-based, SLURM_NODEID) of tasks-per-node list tpn into *tasks.
 * ZEN_EINVAL with a reason when tpn is malformed or has fewer than node + 1 nodes.
 */
zen_status zen__slurm_tasks_on_node(const char *tpn, long node, long *tasks, char *why,
                                    size_t why_cap);

/*
 * The rendezvous port of a Slurm step when MASTER_PORT is not set: 20000 + 10 * (job % 1000) +
 * step % 10, in [20000, 29999] (below Linux's ephemeral ports, 32768 and up). Concurrent steps
 * 0-9 of one job get distinct ports, and so do jobs whose ids differ modulo 1000.
 */
int zen__slurm_port(long job_id, long step_id);

#endif
