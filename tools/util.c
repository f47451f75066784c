#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <zen/comm.h>

#include "cli.h"

/* Used by every command and by main.c: here, not in main.c, so that main.c (which calls the
 * commands) and the commands (which call these) do not call each other. */
int zen_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int zen_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "zen %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `zen %s --help`)\n", cmd);
    return ZEN_EXIT_USAGE;
}

int zen_cli_launched(void)
{
    int rank;
    return zen_comm_env_rank(&rank) != ZEN_OK || rank >= 0;
}

int zen_parse_double(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    /* !(v >= lo && v <= hi) is also true for NaN; ERANGE is an overflow to +-HUGE_VAL or an
     * underflow, neither of which is the number written */
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v) || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

int zen_parse_whole(const char *s, double lo, double hi, double *out)
{
    double v;
    if (zen_parse_double(s, lo, hi, &v) != 0 || v != floor(v))
        return -1;
    *out = v;
    return 0;
}

int zen_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s)) /* strtoull would take "-1" as 2^64 - 1 */
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0' || errno == ERANGE)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int zen_parse_size(const char *s, size_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mult = 1;
    switch (*end) {
    case 'K':
    case 'k':
        mult = 1ull << 10;
        end++;
        break;
    case 'M':
    case 'm':
        mult = 1ull << 20;
        end++;
        break;
    case 'G':
    case 'g':
        mult = 1ull << 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v > (~0ull) / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

void zen_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void zen_machine_line(char *out, size_t size)
{
    char model[128] = "unknown cpu";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *colon = strchr(line, ':');
                if (colon) {
                    snprintf(model, sizeof model, "%s", colon + 2);
                    model[strcspn(model, "\n")] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    struct utsname u;
    if (uname(&u) != 0)
        snprintf(u.release, sizeof u.release, "?");
    snprintf(out, size, "%ld cores, %s, Linux %s", sysconf(_SC_NPROCESSORS_ONLN), model, u.release);
}
