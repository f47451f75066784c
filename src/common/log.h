/* Internal logging: zen_log() from zen.h plus the per-thread rank used in the prefix. */
#ifndef ZEN_COMMON_LOG_H
#define ZEN_COMMON_LOG_H

#include <zen/zen.h>

/* Set the rank shown in this thread's log prefix (-1: none). */
void zen__log_set_thread_rank(int rank);
int zen__log_thread_rank(void);

/* true when a message of this level and subsystem would be written (cheap; check before work). */
int zen__log_enabled(zen_log_level level, const char *subsys);

#define ZEN_ERROR(subsys, ...) zen_log(ZEN_LOG_ERROR, subsys, __VA_ARGS__)
#define ZEN_WARN(subsys, ...)  zen_log(ZEN_LOG_WARN, subsys, __VA_ARGS__)
#define ZEN_INFO(subsys, ...)  zen_log(ZEN_LOG_INFO, subsys, __VA_ARGS__)
#define ZEN_DEBUG(subsys, ...) zen_log(ZEN_LOG_DEBUG, subsys, __VA_ARGS__)

#endif
