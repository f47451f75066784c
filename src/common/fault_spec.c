#include "common/fault_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    if (*v < '0' || *v > '9')
        return -1; /* no sign, no blank: strtol would take " -2" */
    long x = strtol(v, &end, 10);
    if (*end || errno == ERANGE || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

static int parse_action(const char *v, zen_fault_action *a)
{
    static const char *const names[] = {
        "delay", "drop", "truncate", "corrupt", "garbage", "kill"
    };
    for (int i = 0; i < 6; i++) {
        if (strcmp(v, names[i]) == 0) {
            *a = (zen_fault_action)i;
            return 0;
        }
    }
    return -1;
}

/* One "key=value" item into cfg; -1 when the key is unknown or the value malformed. */
static int parse_item(char *item, zen_fault_config *cfg, int *have_action)
{
    char *eq = strchr(item, '=');
    if (!eq)
        return -1;
    *eq = '\0';
    const char *val = eq + 1;
    long v = 0;
    if (strcmp(item, "action") == 0) {
        *have_action = parse_action(val, &cfg->action) == 0;
        return *have_action ? 0 : -1;
    }
    if (strcmp(item, "rank") == 0 || strcmp(item, "peer") == 0) {
        if (parse_long(val, 0, 1 << 20, &v) != 0)
            return -1;
        *(item[0] == 'r' ? &cfg->rank : &cfg->peer) = (int)v;
        return 0;
    }
    long *field = strcmp(item, "after") == 0   ? &cfg->after
                  : strcmp(item, "count") == 0 ? &cfg->count
                  : strcmp(item, "ms") == 0    ? &cfg->ms
                                               : NULL;
    /* ms: at most an hour, so the sleep in nanoseconds cannot overflow */
    long hi = field == &cfg->ms ? 3600L * 1000 : (1L << 62);
    return field && parse_long(val, 0, hi, field) == 0 ? 0 : -1;
}

int zen__fault_spec_parse(const char *spec, zen_fault_config *cfg, char *why, size_t why_size)
{
    cfg->rank = -1;
    cfg->after = 0;
    cfg->count = 1;
    cfg->peer = -1;
    cfg->ms = 100;
    cfg->action = ZEN_FAULT_KILL;
    int have_action = 0;
    char buf[256];
    if (!spec || strlen(spec) >= sizeof buf) {
        snprintf(why, why_size, "longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char copy[256];
        snprintf(copy, sizeof copy, "%s", item);
        if (parse_item(item, cfg, &have_action) != 0) {
            snprintf(why, why_size, "cannot parse '%s'", copy);
            return -1;
        }
    }
    if (cfg->rank < 0 || !have_action) {
        snprintf(why, why_size, "needs rank= and action=");
        return -1;
    }
    return 0;
}
