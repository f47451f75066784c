/* Clocks: monotonic for deadlines and durations, realtime for stamps compared across processes. */
#ifndef ZEN_COMMON_CLOCK_H
#define ZEN_COMMON_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline int64_t zen_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t zen_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Seconds to ns, saturating: INT64_MAX ("never") for NaN, infinity and anything from 1e9 s on
 * (a plain cast of more than 2^63 ns is undefined and in practice yields a negative number). */
static inline int64_t zen_ns_from_s(double s)
{
    if (!(s < 1e9))
        return INT64_MAX;
    return s > 0 ? (int64_t)(s * 1e9) : 0;
}

/* a + b for non-negative ns spans, INT64_MAX when the sum would overflow. */
static inline int64_t zen_ns_add_sat(int64_t a, int64_t b)
{
    return b > INT64_MAX - a ? INT64_MAX : a + b;
}

/* Monotonic deadline timeout_s seconds from now; INT64_MAX for a non-positive timeout. */
static inline int64_t zen_deadline_after(double timeout_s)
{
    if (!(timeout_s > 0))
        return INT64_MAX;
    return zen_ns_add_sat(zen_now_ns(), zen_ns_from_s(timeout_s));
}

/* A poll() timeout in ms until deadline_ns: rounded up, 0 once it passed, at most max_ms (poll
 * takes an int, and a far deadline in ms does not fit one). */
static inline int zen_poll_ms(int64_t deadline_ns, int max_ms)
{
    if (deadline_ns == INT64_MAX)
        return max_ms;
    int64_t left = deadline_ns - zen_now_ns();
    if (left <= 0)
        return 0;
    int64_t ms = left / 1000000 + (left % 1000000 != 0);
    return ms < max_ms ? (int)ms : max_ms;
}

/* A struct timespec on CLOCK_MONOTONIC for pthread_cond_timedwait (condvars use that clock). */
static inline struct timespec zen_deadline_timespec(int64_t deadline_ns)
{
    struct timespec ts;
    if (deadline_ns == INT64_MAX)
        deadline_ns = zen_now_ns() + (int64_t)3600 * 1000000000;
    ts.tv_sec = (time_t)(deadline_ns / 1000000000);
    ts.tv_nsec = (long)(deadline_ns % 1000000000);
    return ts;
}

/* Lock m, waiting at most ns nanoseconds for its holder; 1 when taken. For paths that must not
 * block for long (an abort) but lose something if they skip (the abort notice). */
static inline int zen_mutex_lock_within(pthread_mutex_t *m, int64_t ns)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* pthread_mutex_timedlock's clock */
    int64_t t = (int64_t)until.tv_nsec + ns;
    until.tv_sec += (time_t)(t / 1000000000);
    until.tv_nsec = (long)(t % 1000000000);
    return pthread_mutex_timedlock(m, &until) == 0;
}

void zen__sleep_ns(int64_t ns);

#endif
