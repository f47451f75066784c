/* zen info: version, build features and the tunables registry.
 * ZEN_INFO_MPI / ZEN_INFO_TORCH come from CMake (the build this CLI was configured with): the
 * public API has no feature query, and this is what a user asks before an mpirun or a torchrun. */
#include <stdio.h>
#include <string.h>

#include <zen/comm.h>

#include "cli.h"

static void help(void)
{
    printf("usage: zen info [--params] [--json]\n\n"
           "Print the version, the build's optional parts (the mpi transport, zen_torch), the\n"
           "launcher that started this process (srun, torchrun, mpirun, zen launch: the rank,\n"
           "world size and rendezvous zen takes from it), and every ZEN_* environment variable\n"
           "zen reads, with its value in effect and where it came from: env, default, ignored\n"
           "(malformed or out of range: the default is used; the line below says why) or\n"
           "refused (a malformed identity, address or secret: the job does not start).\n\n"
           "  --json     one JSON object per line\n"
           "  --params   accepted and ignored (older scripts pass it): the variable table is\n"
           "             always printed\n");
}

#ifndef ZEN_INFO_MPI
#define ZEN_INFO_MPI 0
#endif
#ifndef ZEN_INFO_TORCH
#define ZEN_INFO_TORCH 0
#endif

/* The build line: what is in, and for what is not, how to get it. */
static void print_build(int json)
{
    if (json) {
        printf(",\"mpi\":%s,\"zen_torch\":%s", ZEN_INFO_MPI ? "true" : "false",
               ZEN_INFO_TORCH ? "true" : "false");
        return;
    }
    printf("build: mpi transport %s; zen_torch %s\n",
           ZEN_INFO_MPI ? "yes" : "no (configure with an MPI installed: scripts/deps.sh)",
           ZEN_INFO_TORCH ? "yes (PYTHONPATH=<build>/python, docs/pytorch.md)"
                          : "no (needs torch, scripts/deps.sh, and ZEN_BUILD_PYTHON on)");
}

/* Which launcher started this process, named after the variable its rank came from. */
static const char *launcher_name(const zen_launch_env *e)
{
    static const char *const names[][2] = {
        { "ZEN_RANK", "zen" },      { "RANK", "torchrun" }, { "OMPI_COMM_WORLD_RANK", "mpirun" },
        { "SLURM_PROCID", "srun" }, { "PMI_RANK", "pmi" },  { "PMIX_RANK", "pmix" },
    };
    if (!e->rank_var[0])
        return "none";
    if (e->slurm_step && strcmp(e->rank_var, "RANK") != 0 && strcmp(e->rank_var, "ZEN_RANK") != 0 &&
        strncmp(e->rank_var, "OMPI", 4) != 0)
        return "srun";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(e->rank_var, names[i][0]) == 0)
            return names[i][1];
    return "?";
}

/* The launcher line: what zen_comm_create would take from the environment. */
static void print_launcher(int json)
{
    zen_launch_env e = { .size = sizeof e };
    if (zen_comm_env_launch(&e) != ZEN_OK) {
        printf(json ? ",\"launcher\":\"malformed\""
                    : "launcher: malformed environment (see above)\n");
        return;
    }
    if (json) {
        printf(",\"launcher\":\"%s\",\"rank\":%d,\"world_size\":%d,\"master\":", launcher_name(&e),
               e.rank, e.world_size);
        zen_json_string(stdout, e.master_addr);
        printf(",\"master_port\":%d", e.master_port);
    } else if (e.rank < 0) {
        printf("launcher: none (not started as a rank)\n");
    } else {
        printf("launcher: %s (rank %d of %d from %s, master %s:%d)\n", launcher_name(&e), e.rank,
               e.world_size, e.rank_var, e.master_addr, e.master_port);
    }
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
        print_build(1);
        print_launcher(1);
        printf("}\n");
    } else {
        printf("zen %s\nmachine: %s\n", ZEN_VERSION_STRING, machine);
        print_build(0);
        print_launcher(0);
        printf("\n%-26s %-12s %-8s %s\n", "variable", "value", "source", "meaning");
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
