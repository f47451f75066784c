#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <zen/comm.h>

#include "cli.h"

int zen_cli_launched(void)
{
    int rank;
    return zen_comm_env_rank(&rank) != ZEN_OK || rank >= 0;
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
