#include "common/wait_report.h"

#include <math.h>
#include <stdio.h>

#include "common/clock.h"
#include "common/tunables.h"

void zen__wait_report_start(zen_wait_report *w)
{
    double s = zen__param_timeout("WAIT_REPORT_S");
    w->start_ns = zen_now_ns();
    w->interval_ns = isinf(s) || s >= 1e9 ? 0 : (int64_t)(s * 1e9);
    w->next_ns = w->interval_ns > 0 ? zen_ns_add_sat(w->start_ns, w->interval_ns) : INT64_MAX;
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
