/* Subcommands not built yet; each is replaced by its own tools/cmd_*.c. */
#include <stdio.h>

#include "cli.h"

static int not_yet(const char *name)
{
    fprintf(stderr, "zen %s: not available in this build yet\n", name);
    return ZEN_EXIT_FAIL;
}

int zen_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return not_yet("bench");
}

int zen_cmd_launch(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return not_yet("launch");
}

int zen_cmd_train(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return not_yet("train");
}

int zen_cmd_simulate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return not_yet("simulate");
}
