/*
 * Shared pieces of the zen CLI: subcommand table, usage errors, JSON output helpers.
 * Exit codes: 0 success, 1 failure, 2 usage error.
 */
#ifndef ZEN_TOOLS_CLI_H
#define ZEN_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#define ZEN_EXIT_OK    0
#define ZEN_EXIT_FAIL  1
#define ZEN_EXIT_USAGE 2

/* Each subcommand: argv[0] is the subcommand name. */
int zen_cmd_info(int argc, char **argv);
int zen_cmd_bench(int argc, char **argv);
/* `zen bench sparse ...` (argv[0] == "sparse"), dispatched from zen_cmd_bench. */
int zen_cmd_bench_sparse(int argc, char **argv);
/* `zen bench topk ...` (argv[0] == "topk"): top-k selection on one process. */
int zen_cmd_bench_topk(int argc, char **argv);
int zen_cmd_launch(int argc, char **argv);
int zen_cmd_train(int argc, char **argv);
int zen_cmd_simulate(int argc, char **argv);

/* Print "zen CMD: message" and a hint to stderr; returns ZEN_EXIT_USAGE. */
int zen_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* true when arg is -h or --help */
int zen_is_help(const char *arg);

/*
 * Numeric option values. Each takes the whole string (no trailing characters) and returns 0 with
 * *out set, or -1 leaving *out alone: zen_parse_double a finite number in [lo, hi] (NaN, inf and
 * overflow refused, so a bad value cannot flow into a table or a deadline); zen_parse_whole the
 * same for a whole number (4e7 as well as 40000000); zen_parse_u64 decimal digits up to 2^64 - 1.
 */
int zen_parse_double(const char *s, double lo, double hi, double *out);
int zen_parse_whole(const char *s, double lo, double hi, double *out);
int zen_parse_u64(const char *s, uint64_t *out);

/* Parse a size such as 64, 4K, 64M, 1G (powers of 1024); 0 on success, -1 on a bad string. */
int zen_parse_size(const char *s, size_t *out);

/* Write s as a JSON string literal (with quotes) to f. */
void zen_json_string(FILE *f, const char *s);

/* One line describing this machine (cores, model name, kernel) for benchmark headers. */
void zen_machine_line(char *out, size_t size);

/* 1 when a launcher started this process as one rank of a world (zen_comm_env_rank; a malformed
 * launcher variable counts, so that zen_comm_create names it), 0 when its ranks are threads. */
int zen_cli_launched(void);

#endif
