#pragma once

/* Communication threads and the CPU scheduler (thread_sched.c says why). */

/* Ask the kernel to treat the calling thread as latency-sensitive: a scheduling slice of
 * ZEN_COMM_SLICE_US (0: leave the kernel's default). Best effort; returns 1 when the kernel took
 * it, 0 otherwise. */
int zen__thread_comm_slice(void);
