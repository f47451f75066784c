/* zen info: version, build features and the tunables registry. */
#include <stdio.h>
#include <string.h>

#include <zen/comm.h>

#include "cli.h"

static void help(void)
{
    printf("usage: zen info [--params] [--json]\n\n"
           "Print the version and every ZEN_* environment variable zen reads, with its value in\n"
           "effect and where it came from: env, default, ignored (malformed or out of range: the\n"
           "default is used; the line below says why) or refused (a malformed identity, address\n"
           "or secret: the job does not start).\n\n"
           "  --json   one JSON object per line\n");
}

int zen_cmd_info(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (zen_is_help(argv[i])) {
            help();
            return ZEN_EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--params") != 0) {
            return zen_usage_error("info", "unknown option '%s'", argv[i]);
        }
    }
    char machine[256];
    zen_machine_line(machine, sizeof machine);
    if (json) {
        printf("{\"version\":\"%s\",\"machine\":", ZEN_VERSION_STRING);
        zen_json_string(stdout, machine);
        printf("}\n");
    } else {
        printf("zen %s\nmachine: %s\n\n%-26s %-12s %-8s %s\n", ZEN_VERSION_STRING, machine,
               "variable", "value", "source", "meaning");
    }
    for (size_t i = 0; i < zen_param_count(); i++) {
        zen_param_info p;
        if (zen_param_get(i, &p) != ZEN_OK)
            continue;
        if (json) {
            printf("{\"param\":");
            zen_json_string(stdout, p.name);
            printf(",\"value\":");
            zen_json_string(stdout, p.value);
            printf(",\"default\":");
            zen_json_string(stdout, p.default_value);
            printf(",\"source\":\"%s\",\"description\":", p.source);
            zen_json_string(stdout, p.description);
            if (p.problem) {
                printf(",\"ignored_value\":");
                zen_json_string(stdout, p.raw_value);
                printf(",\"problem\":");
                zen_json_string(stdout, p.problem);
            }
            printf("}\n");
        } else {
            printf("%-26s %-12s %-8s %s\n", p.name, p.value[0] ? p.value : "-", p.source,
                   p.description);
            if (p.problem)
                printf("%-26s   ^ %s %s='%s': %s\n", "", p.source, p.name, p.raw_value, p.problem);
        }
    }
    return ZEN_EXIT_OK;
}
