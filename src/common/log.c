/*
 * Logging: level and subsystem filters read once from ZEN_LOG_LEVEL and ZEN_LOG_SUBSYS; lines are
 * prefixed host:pid:rank (the NCCL convention) and written whole, so lines of different rank
 * threads never interleave mid-line.
 */
#include "common/log.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/tunables.h"
#include "common/tunables_table.h"

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = ZEN_LOG_WARN;
static char log_subsys[256]; /* comma-separated list, empty = all */
static char log_host[64];
static zen_log_sink log_sink;
static void *log_sink_user;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int thread_rank = -1;

/* A level or subsystem list that the tunables table rejected: warned about once the logger is
 * up (the warning cannot be written from inside log_init, which every log call waits for). */
static atomic_int log_rejected;

static void log_init(void)
{
    static const char *const names[] = { "error", "warn", "info", "debug", "trace" };
    int bad_level = 0, bad_subsys = 0;
    const char *lvl = zen__param_quiet("LOG_LEVEL", &bad_level);
    for (int i = 0; i < 5; i++)
        if (strcmp(lvl, names[i]) == 0)
            log_level = i;
    const char *subsys = zen__param_quiet("LOG_SUBSYS", &bad_subsys);
    if (strcasecmp(subsys, "all") != 0) {
        snprintf(log_subsys, sizeof log_subsys, ",%s,", subsys);
        for (char *p = log_subsys; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        if (strstr(log_subsys, ",all,"))
            log_subsys[0] = '\0';
    }
    atomic_store(&log_rejected, bad_level || bad_subsys);
    if (gethostname(log_host, sizeof log_host) != 0)
        snprintf(log_host, sizeof log_host, "?");
    log_host[sizeof log_host - 1] = '\0';
}

void zen__log_set_thread_rank(int rank)
{
    thread_rank = rank;
}

int zen__log_thread_rank(void)
{
    return thread_rank;
}

void zen_log_set_sink(zen_log_sink sink, void *user)
{
    pthread_mutex_lock(&log_lock);
    log_sink = sink;
    log_sink_user = user;
    pthread_mutex_unlock(&log_lock);
}

int zen__log_enabled(zen_log_level level, const char *subsys)
{
    pthread_once(&log_once, log_init);
    if (atomic_load_explicit(&log_rejected, memory_order_relaxed) &&
        atomic_exchange(&log_rejected, 0)) {
        char warning[400]; /* worded by the table's checks, given here now that the log is up */
        if (zen__param_warning("LOG_LEVEL", warning, sizeof warning))
            ZEN_WARN("init", "%s", warning);
        if (zen__param_warning("LOG_SUBSYS", warning, sizeof warning))
            ZEN_WARN("init", "%s", warning);
    }
    if ((int)level > log_level)
        return 0;
    if (level == ZEN_LOG_ERROR || !log_subsys[0] || !subsys)
        return 1;
    char key[40];
    snprintf(key, sizeof key, ",%s,", subsys);
    return strstr(log_subsys, key) != NULL;
}

void zen_log(zen_log_level level, const char *subsys, const char *fmt, ...)
{
    if ((unsigned)level > ZEN_LOG_TRACE || !zen__log_enabled(level, subsys))
        return;
    static const char *const tags[] = { "ERROR", "WARN", "INFO", "DEBUG", "TRACE" };
    char line[1024];
    int n = snprintf(line, sizeof line, "%s:%d:%d zen %s %s: ", log_host, (int)getpid(),
                     thread_rank, tags[level], subsys ? subsys : "-");
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    if ((size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    if (log_sink)
        log_sink(level, subsys, line, log_sink_user);
    else
        fprintf(stderr, "%s\n", line);
    pthread_mutex_unlock(&log_lock);
}
