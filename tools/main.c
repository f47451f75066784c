/* zen: command-line entry point. Dispatches to tools/cmd_*.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <zen/zen.h>

#include "cli.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    { "bench", zen_cmd_bench, "measure dense and sparse collectives (nccl-tests conventions)" },
    { "train", zen_cmd_train, "train a GPT on a text corpus with data x tensor parallelism" },
    { "launch", zen_cmd_launch,
      "start N local processes of a command as the ranks of one job (shm, or tcp)" },
    { "simulate", zen_cmd_simulate, "predict sparse-sync schemes at scale from the cost model" },
    { "info", zen_cmd_info, "version, build features and every ZEN_* tunable" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: zen COMMAND [ARGS]   (zen COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return ZEN_EXIT_USAGE;
    }
    if (zen_is_help(argv[1])) {
        usage(stdout);
        return ZEN_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("zen %s\n", ZEN_VERSION_STRING);
        return ZEN_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "zen: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return ZEN_EXIT_USAGE;
}
