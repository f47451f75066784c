/*
 * zen launch -n N [--port P] [--grace S] [--transport T] [--bind B] [--prefix W] [--] CMD ARGS...
 *
 * Starts N local processes of CMD as the ranks of one job (like `torchrun --standalone`; they
 * talk over shared memory unless --transport tcp):
 * picks a free port for rank 0's rendezvous, sets the rank environment in each child, forwards
 * SIGINT/SIGTERM to every child and waits. The ranks share a fresh job secret (unless
 * ZEN_JOB_SECRET or ZEN_JOB_SECRET_FILE is set) and one process group, and die with the launcher
 * (PR_SET_PDEATHSIG) even when it is killed with SIGKILL. When a rank fails (non-zero exit or a
 * signal) it says which on stderr, gives the others a grace period to notice on their own (zen's
 * abort cascade usually ends them within milliseconds, each naming the cause), then terminates what
 * is left, and exits 1.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "free_port.h"
#include "launch_output.h"
#include "opt_parse.h"

#define MAX_RANKS 1024

static pid_t children[MAX_RANKS];
static volatile sig_atomic_t nchildren;
static volatile sig_atomic_t got_signal;

/* --bind: BIND_CORE pins rank r to the (r mod count)-th core of the launcher's own affinity mask
 * (so `taskset` and cgroup cpusets are respected); BIND_AUTO (default) is the same, also when the
 * ranks outnumber the cores. Left to the scheduler, oversubscribed ranks on this project's 2-core
 * VM sat 3 or 4 to a core for thousands of calls while the other core ran one or none (perf sched),
 * and shm's collectives, which need every rank of a core to run once per call, took 2-4x as long
 * as with the ranks spread evenly (docs/dense-vs-mpi.md); mpirun leaves oversubscribed ranks
 * unbound, zen does not. */
enum {
    BIND_NONE,
    BIND_CORE,
    BIND_AUTO
};

static int bind_mode = BIND_AUTO;
static cpu_set_t usable_cpus; /* the launcher's affinity mask, read once */
static int pin_ranks;         /* the decision for this job */
static int tag_output = -1;   /* --prefix: "[rank N] " before every line of the ranks */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: zen launch -n N [--port P] [--grace S] [--transport T] [--bind B] [--prefix W]\n"
        "                  [--] CMD [ARGS...]\n\n"
        "Start N processes of CMD on this host as the ranks of one job.\n"
        "Each child gets ZEN_RANK, ZEN_WORLD_SIZE, ZEN_LOCAL_RANK, ZEN_LOCAL_SIZE,\n"
        "ZEN_MASTER_ADDR=127.0.0.1 and ZEN_MASTER_PORT (and the torchrun names RANK,\n"
        "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).\n"
        "PyTorch scripts with dist.init_process_group(\"zen\") run unchanged under it,\n"
        "and under torchrun; Debian's torchrun (torch 1.13) on Python 3.11 starts workers\n"
        "only with --redirects 1 --tee 1 (docs/pytorch.md):\n"
        "  /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node N \\\n"
        "      --redirects 1 --tee 1 SCRIPT.py\n\n"
        "  -n N, -np N  number of ranks (1..%d)\n"
        "  --port P     rendezvous port (default: a free port)\n"
        "  --grace S    seconds the other ranks get to exit on their own after one fails,\n"
        "               before SIGTERM (0..1e6, default 3)\n"
        "  --transport T  the ranks' transport, as ZEN_TRANSPORT: auto (default: shared\n"
        "               memory among the ranks of a host, tcp across hosts; shm+tcp says\n"
        "               the same), shm (all ranks on this host) or tcp; the other spellings\n"
        "               of every zen command, inproc and mpi, are not launched processes\n"
        "  --bind B     core: pin rank r to the (r mod C)-th of the C cores this launcher may\n"
        "               use; none: leave placement to the scheduler; auto (default): core,\n"
        "               also when N > C (oversubscribed ranks then share cores evenly, where\n"
        "               the scheduler was seen to stack them; Open MPI's mpirun binds to core\n"
        "               when N <= C and not at all beyond)\n"
        "Unless OPENBLAS_NUM_THREADS is set, every rank gets OPENBLAS_NUM_THREADS =\n"
        "max(1, C / N) (1 when pinned): OpenBLAS threads beyond that only compete with\n"
        "the ranks for the cores (torchrun sets OMP_NUM_THREADS=1 for the same reason).\n"
        "  --prefix W   on: every line a rank writes is prefixed with \"[rank N] \" (like\n"
        "               mpirun --tag-output); off: ranks write to the launcher's stdout and\n"
        "               stderr directly; auto (default): on when stdout or stderr is a\n"
        "               terminal\n\n"
        "At start, one line on stderr says where the ranks run (host, transport, the core\n"
        "of each rank or why they are not bound).\n"
        "The options end at -- or at the first word that is not an option (CMD).\n"
        "SIGINT and SIGTERM are forwarded to every rank. Exit status: 0 when every rank\n"
        "exits 0; 1 when one fails (\"zen launch: rank R exited with status S\" on\n"
        "stderr); 2 on a usage error.\n",
        MAX_RANKS);
}

static void forward(int sig)
{
    got_signal = sig;
    for (int i = 0; i < nchildren; i++)
        if (children[i] > 0)
            kill(children[i], sig);
}

static void set_int_env(const char *a, const char *b, int v)
{
    char s[32];
    snprintf(s, sizeof s, "%d", v);
    setenv(a, s, 1);
    setenv(b, s, 1);
}

/* The (rank mod count)-th CPU of usable_cpus (CPU_SETSIZE when there is none). */
static int cpu_of(int rank)
{
    int count = CPU_COUNT(&usable_cpus), want = rank % (count > 0 ? count : 1), cpu = 0;
    for (int seen = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &usable_cpus) && seen++ == want)
            break;
    return cpu;
}

static void pin_to_core(int rank)
{
    int cpu = cpu_of(rank);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (cpu >= CPU_SETSIZE || sched_setaffinity(0, sizeof set, &set) != 0)
        fprintf(stderr, "zen launch: rank %d: cannot bind to core %d: %s (running unbound)\n", rank,
                cpu, strerror(errno));
}

/* OpenBLAS starts its thread pool when the library loads, one thread per CPU it may use, and an
 * idle pool thread polls with sched_yield for a while before it sleeps: with 4 ranks on 2 cores
 * perf sched showed each rank's pool thread taking a 6 us turn on the core between every two
 * ranks. A user's setting wins. */
static void share_blas_threads(int n)
{
    if (getenv("OPENBLAS_NUM_THREADS"))
        return;
    int per = pin_ranks ? 1 : CPU_COUNT(&usable_cpus) / (n > 0 ? n : 1);
    char v[16];
    snprintf(v, sizeof v, "%d", per > 1 ? per : 1);
    setenv("OPENBLAS_NUM_THREADS", v, 1);
}

/* Every rank joins the process group of rank 0, so `kill -- -PGID` reaches the whole job. */
static pid_t rank_group;

static pid_t spawn(int rank, int n, int port, char **cmd)
{
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid > 0) {
        (void)setpgid(pid, rank_group ? rank_group : pid); /* both sides: no race with exec */
        if (!rank_group)
            rank_group = pid;
        return pid;
    }
    if (pid < 0)
        return pid;
    (void)setpgid(0, rank_group ? rank_group : 0);
    /* A launcher killed with SIGKILL cannot forward anything: the kernel ends the ranks then.
     * If it died before prctl took effect, getppid() already changed. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
        _exit(128 + SIGKILL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    set_int_env("ZEN_RANK", "RANK", rank);
    set_int_env("ZEN_WORLD_SIZE", "WORLD_SIZE", n);
    set_int_env("ZEN_LOCAL_RANK", "LOCAL_RANK", rank);
    set_int_env("ZEN_LOCAL_SIZE", "LOCAL_WORLD_SIZE", n);
    set_int_env("ZEN_MASTER_PORT", "MASTER_PORT", port);
    setenv("ZEN_MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    share_blas_threads(n);
    if (pin_ranks)
        pin_to_core(rank);
    if (tag_output)
        zen_launch_out_child(rank);
    execvp(cmd[0], cmd);
    fprintf(stderr, "zen launch: rank %d: cannot run %s: %s\n", rank, cmd[0], strerror(errno));
    _exit(127);
}

/* A fresh 256-bit job secret for the ranks (docs/security.md): strangers that reach the
 * rendezvous port cannot join. Inherited through the environment, visible only to this uid. */
/* An empty variable counts as unset: the ranks would run without a secret (tunables.c reads
 * an empty value as the default, none), so the launcher draws one as if it were absent. */
static int env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

static int set_job_secret(void)
{
    unsigned char raw[32];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0)
            got += (size_t)n;
    }
    char hex[2 * sizeof raw + 1];
    for (size_t k = 0; k < sizeof raw; k++)
        snprintf(hex + 2 * k, 3, "%02x", raw[k]);
    return setenv("ZEN_JOB_SECRET", hex, 1);
}

static int rank_of(pid_t pid, int n)
{
    for (int i = 0; i < n; i++)
        if (children[i] == pid)
            return i;
    return -1;
}

static void describe(int status, char *out, size_t size)
{
    if (WIFEXITED(status))
        snprintf(out, size, "%d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, size, "%d (killed by signal %d, %s)", 128 + WTERMSIG(status),
                 WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(out, size, "%d", status);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void signal_all(int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (children[i] > 0)
            kill(children[i], sig);
}

/* One line on stderr at start: where the ranks run (like mpirun --report-bindings, shorter). */
static void report_placement(int n)
{
    char host[256] = "this host", line[1024];
    gethostname(host, sizeof host - 1);
    const char *tr = getenv("ZEN_TRANSPORT");
    int cores = CPU_COUNT(&usable_cpus);
    size_t len = (size_t)snprintf(
        line, sizeof line, "zen launch: %d rank%s on %s, transport %s; ", n, n == 1 ? "" : "s",
        host, tr && *tr && strcmp(tr, "auto") ? tr : "auto (shared memory on this host)");
    if (pin_ranks) {
        for (int r = 0; r < n && len < sizeof line; r++) {
            if (r == 8 && n > 10) { /* the rule is clear by then */
                len += (size_t)snprintf(line + len, sizeof line - len, ", ..., rank %d on cpu %d",
                                        n - 1, cpu_of(n - 1));
                break;
            }
            len += (size_t)snprintf(line + len, sizeof line - len, "%srank %d on cpu %d",
                                    r ? ", " : "", r, cpu_of(r));
        }
        if (n > cores && len < sizeof line)
            snprintf(line + len, sizeof line - len, " (oversubscribed: %d ranks on %d cores)", n,
                     cores);
    } else if (n > cores && cores > 0) {
        snprintf(line + len, sizeof line - len,
                 "not bound: %d ranks on %d cores (oversubscribed, ranks share cores; timings "
                 "are not those of a dedicated core)",
                 n, cores);
    } else {
        snprintf(line + len, sizeof line - len,
                 "not bound (--bind none): the scheduler places "
                 "them on %d cores",
                 cores);
    }
    fprintf(stderr, "%s\n", line);
}

/*
 * Wait for every child. After the first failure the others get grace_s seconds to notice and
 * exit on their own (printing their own view of the error), then SIGTERM, then 2 s later
 * SIGKILL. After a forwarded SIGINT/SIGTERM they get grace_s seconds before SIGKILL.
 * Returns the launcher's exit status.
 */
static int supervise(int n, double grace_s)
{
    int alive = n, failed = 0, term_sent = 0;
    double term_at = -1, kill_at = -1;
    while (alive > 0) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno != EINTR)
            break;
        if (pid <= 0) {
            double now = now_s();
            if (got_signal && kill_at < 0)
                kill_at = now + grace_s;
            if (term_at >= 0 && !term_sent && now >= term_at) {
                fprintf(stderr, "zen launch: terminating the %d rank(s) still running\n", alive);
                signal_all(n, SIGTERM);
                term_sent = 1;
                if (kill_at < 0)
                    kill_at = now + 2;
            }
            if (kill_at >= 0 && now >= kill_at) {
                signal_all(n, SIGKILL);
                kill_at = now + 3600;
            }
            if (tag_output) {
                zen_launch_out_pump(5); /* relays the ranks' lines while it waits */
            } else {
                struct timespec ts = { 0, 5 * 1000 * 1000 };
                nanosleep(&ts, NULL);
            }
            continue;
        }
        int r = rank_of(pid, n);
        if (r < 0)
            continue;
        children[r] = -1;
        alive--;
        int bad = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (bad && !term_sent && !got_signal) {
            char s[96];
            describe(status, s, sizeof s);
            fprintf(stderr, "zen launch: rank %d exited with status %s\n", r, s);
            if (term_at < 0)
                term_at = now_s() + grace_s;
        }
        failed |= bad;
    }
    if (got_signal)
        return 128 + got_signal;
    return failed ? ZEN_EXIT_FAIL : ZEN_EXIT_OK;
}

/* --transport for the ranks, parsed like every command's (opt_parse.h) and handed to them as
 * ZEN_TRANSPORT, which their "auto" reads. The ranks are processes this launcher starts: inproc
 * (threads of one process) and mpi (ranks started by mpirun) cannot be launched here. */
static int set_rank_transport(const char *t)
{
    zen_transport_kind kind;
    if (zen_opt_transport(t, &kind) != 0)
        return zen_opt_transport_error("launch", t);
    if (kind == ZEN_TRANSPORT_INPROC)
        return zen_usage_error("launch",
                               "--transport inproc runs the ranks as threads of one process: "
                               "run the command without zen launch (e.g. --ranks N)");
    if (kind == ZEN_TRANSPORT_MPI)
        return zen_usage_error("launch", "--transport mpi ranks are started by mpirun, not by "
                                         "zen launch");
    setenv("ZEN_TRANSPORT", t, 1); /* inherited by every rank */
    return ZEN_EXIT_OK;
}

/* The options up to the command; *first gets its index. -1: go on; else the exit status
 * (--help, a usage error). */
static int parse_options(int argc, char **argv, int *np, int *portp, double *grace_sp, int *first)
{
    int n = 0, port = 0;
    double grace_s = 3;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (zen_is_help(a)) {
            usage(stdout);
            return ZEN_EXIT_OK;
        }
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break; /* the command starts here, as with mpirun: `--` is optional */
        if (i + 1 >= argc)
            return zen_usage_error("launch", "option %s needs a value", a);
        long v;
        if (strcmp(a, "-n") == 0 || strcmp(a, "-np") == 0 || strcmp(a, "--nproc") == 0) {
            if (zen_parse_long(argv[++i], 1, MAX_RANKS, &v) != 0)
                return zen_usage_error("launch", "-n must be 1..%d, not '%s'", MAX_RANKS, argv[i]);
            n = (int)v;
        } else if (strcmp(a, "--port") == 0) {
            if (zen_parse_long(argv[++i], 1, 65535, &v) != 0)
                return zen_usage_error("launch", "--port must be 1..65535, not '%s'", argv[i]);
            port = (int)v;
        } else if (strcmp(a, "--transport") == 0) {
            int rc = set_rank_transport(argv[++i]);
            if (rc != ZEN_EXIT_OK)
                return rc;
        } else if (strcmp(a, "--bind") == 0) {
            const char *b = argv[++i];
            if (strcmp(b, "core") && strcmp(b, "none") && strcmp(b, "auto"))
                return zen_usage_error("launch", "--bind must be auto, core or none, not '%s'", b);
            bind_mode = !strcmp(b, "core") ? BIND_CORE : !strcmp(b, "none") ? BIND_NONE : BIND_AUTO;
        } else if (strcmp(a, "--prefix") == 0) {
            const char *w = argv[++i];
            if (strcmp(w, "on") && strcmp(w, "off") && strcmp(w, "auto"))
                return zen_usage_error("launch", "--prefix must be auto, on or off, not '%s'", w);
            tag_output = !strcmp(w, "on") ? 1 : !strcmp(w, "off") ? 0 : -1;
        } else if (strcmp(a, "--grace") == 0) {
            if (zen_parse_double(argv[++i], 0, 1e6, &grace_s) != 0)
                return zen_usage_error("launch", "--grace must be seconds in [0, 1e6], not '%s'",
                                       argv[i]);
        } else {
            return zen_usage_error("launch", "unknown option '%s'", a);
        }
    }
    *np = n;
    *portp = port;
    *grace_sp = grace_s;
    *first = i;
    return -1;
}

int zen_cmd_launch(int argc, char **argv)
{
    int n = 0, port = 0, i = 1;
    double grace_s = 3;
    int prc = parse_options(argc, argv, &n, &port, &grace_s, &i);
    if (prc >= 0)
        return prc;
    if (n == 0)
        return zen_usage_error("launch", "missing -n N");
    if (i >= argc)
        return zen_usage_error("launch", "missing the command to run (after the options or --)");
    CPU_ZERO(&usable_cpus);
    if (sched_getaffinity(0, sizeof usable_cpus, &usable_cpus) != 0 || CPU_COUNT(&usable_cpus) < 1)
        pin_ranks = 0; /* no mask to place ranks in */
    else
        pin_ranks = bind_mode != BIND_NONE;
    if (tag_output < 0)
        tag_output = isatty(STDOUT_FILENO) || isatty(STDERR_FILENO);
    if (tag_output && zen_launch_out_open(n) != 0) {
        fprintf(stderr, "zen launch: cannot create the output pipes (%s): ranks write untagged\n",
                strerror(errno));
        tag_output = 0;
    }
    report_placement(n);
    if (port == 0 && (port = zen_free_port()) < 0) {
        fprintf(stderr, "zen launch: cannot find a free port (use --port)\n");
        return ZEN_EXIT_FAIL;
    }
    if (!env_set("ZEN_JOB_SECRET") && !env_set("ZEN_JOB_SECRET_FILE") && set_job_secret() != 0) {
        fprintf(stderr, "zen launch: cannot draw a job secret: %s\n", strerror(errno));
        return ZEN_EXIT_FAIL;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fflush(NULL);
    /* Signals wait until the child is recorded, so none escapes forwarding. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    for (int r = 0; r < n; r++) {
        sigprocmask(SIG_BLOCK, &block, &old);
        pid_t pid = spawn(r, n, port, argv + i);
        if (pid > 0) {
            children[r] = pid;
            nchildren = r + 1;
            if (tag_output)
                zen_launch_out_forked(r);
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0) {
            fprintf(stderr, "zen launch: cannot start rank %d: %s\n", r, strerror(errno));
            forward(SIGTERM);
            supervise(r, grace_s);
            if (tag_output)
                zen_launch_out_close(200);
            return ZEN_EXIT_FAIL;
        }
    }
    int rc = supervise(n, grace_s);
    if (tag_output)
        zen_launch_out_close(200); /* what the ranks wrote last */
    return rc;
}
