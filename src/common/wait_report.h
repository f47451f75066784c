/*
 * Progress lines of long waits. A job missing a rank used to print nothing for the whole
 * ZEN_TIMEOUT_S (300 s by default); every blocking wait of zen's own (rendezvous, Store, shm
 * setup, point-to-point and collective receives) now says whom it waits for every
 * ZEN_WAIT_REPORT_S seconds (30 by default): "still waiting for rank(s) 2, 3 (30 s of 300 s)".
 *
 * A wait keeps one zen_wait_report, blocks in slices that end at the next report
 * (zen__wait_report_slice), and prints when zen__wait_report_due says so. Not thread-safe: one
 * per wait, on the waiting thread's stack.
 */
#ifndef ZEN_COMMON_WAIT_REPORT_H
#define ZEN_COMMON_WAIT_REPORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct zen_wait_report {
    int64_t start_ns;
    int64_t next_ns;     /* INT64_MAX: never (ZEN_WAIT_REPORT_S=inf) */
    int64_t interval_ns; /* 0: never */
} zen_wait_report;

/* Start the clock now; the interval is ZEN_WAIT_REPORT_S. */
void zen__wait_report_start(zen_wait_report *w);

/* ZEN_WAIT_REPORT_S in ns (0: never), for waits on a hot path that read it once at setup. */
int64_t zen__wait_report_interval_ns(void);

/* Start the clock at start_ns with a given interval (0: never report); reads no tunable. */
void zen__wait_report_start_at(zen_wait_report *w, int64_t start_ns, int64_t interval_ns);

/* The earlier of deadline_ns and the next report: the end of this slice of the wait. */
int64_t zen__wait_report_slice(const zen_wait_report *w, int64_t deadline_ns);

/* 1 when a report is due now (and the next is scheduled one interval later), else 0. */
int zen__wait_report_due(zen_wait_report *w);

/* "30 s of 300 s": the time waited so far and the whole wait up to deadline_ns (whole seconds
 * from 10 s on, tenths below). */
void zen__wait_report_times(const zen_wait_report *w, int64_t deadline_ns, char *out, size_t n);

/* The line of a receive that waits long: "rank R: still waiting for a message from rank P
 * (30 s of 300 s)" (subsystem transport, level warn). */
void zen__wait_report_say(const zen_wait_report *w, int64_t deadline_ns, int rank, int peer);

/* Seconds since zen__wait_report_start. */
double zen__wait_report_elapsed_s(const zen_wait_report *w);

#endif
