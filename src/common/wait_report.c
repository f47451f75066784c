#include "common/wait_report.h"

#include <math.h>
#include <stdio.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"

int64_t zen__wait_report_interval_ns(void)
{
    double s = zen__param_timeout("WAIT_REPORT_S");
    return isinf(s) || s >= 1e9 ? 0 : (int64_t)(s * 1e9);
}

void zen__wait_report_start_at(zen_wait_report *w, int64_t start_ns, int64_t interval_ns)
{
    w->start_ns = start_ns;
    w->interval_ns = interval_ns > 0 ? interval_ns : 0;
    w->next_ns = w->interval_ns > 0 ? zen_ns_add_sat(start_ns, w->interval_ns) : INT64_MAX;
}

void zen__wait_report_start(zen_wait_report *w)
{
    zen__wait_report_start_at(w, zen_now_ns(), zen__wait_report_interval_ns());
}

int64_t zen__wait_report_slice(const zen_wait_report *w, int64_t deadline_ns)
{
    return w->next_ns < deadline_ns ? w->next_ns : deadline_ns;
}

int zen__wait_report_due(zen_wait_report *w)
{
    int64_t now = zen_now_ns();
    if (now < w->next_ns)
        return 0;
    /* one line per interval, however late the caller looked */
    while (w->next_ns <= now)
        w->next_ns = zen_ns_add_sat(w->next_ns, w->interval_ns);
    return 1;
}

double zen__wait_report_elapsed_s(const zen_wait_report *w)
{
    return (double)(zen_now_ns() - w->start_ns) / 1e9;
}

static int secs(char *out, size_t n, double s)
{
    return snprintf(out, n, s >= 10 || s == 0 ? "%.0f s" : "%.1f s", s);
}

void zen__wait_report_times(const zen_wait_report *w, int64_t deadline_ns, char *out, size_t n)
{
    int k = secs(out, n, zen__wait_report_elapsed_s(w));
    if (k < 0 || (size_t)k >= n)
        return;
    if (deadline_ns == INT64_MAX)
        snprintf(out + k, n - (size_t)k, " (no deadline)");
    else
        secs(out + k + snprintf(out + k, n - (size_t)k, " of "), n - (size_t)k - 4,
             (double)(deadline_ns - w->start_ns) / 1e9);
}

void zen__wait_report_say(const zen_wait_report *w, int64_t deadline_ns, int rank, int peer)
{
    char times[48];
    zen__wait_report_times(w, deadline_ns, times, sizeof times);
    ZEN_WARN("transport", "rank %d: still waiting for a message from rank %d (%s)", rank, peer,
             times);
}
