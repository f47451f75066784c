#!/usr/bin/env bash
# srun starts zen ranks with no SLURM-to-RANK shim (docs/multi-host.md, "Slurm"), under a real
# Slurm: a single-node cluster this script configures and starts in a temporary directory
# (munged, slurmctld, slurmd of Debian's slurm-wlm and munge; proctrack/linuxproc, no cgroups,
# no accounting, oversubscription allowed), then stops.
#
#   1. srun -n 4 zen bench allreduce --check --json: one 4-rank job (not four 1-process benches),
#      every result checked against a reference (wrong: 0), rank 0 the only one printing;
#      the same with --mpi=pmi2 (PMI_SIZE set: zen's own transport, not an MPI that cannot start);
#   2. srun -n 2 python3 examples/torch_ddp_kjv.py --backend zen, a few steps (when the build made
#      zen_torch: PYTHONPATH given and `import zen_torch` works);
#   3. in an sbatch script, the script itself is not a rank (zen info says launcher none) while
#      its srun tasks are.
#
# usage: tests/slurm/slurm-test.sh ZEN_BIN [PYTHONPATH of zen_torch, or "" to leave out step 2]
#        [PYTHON with torch (default /usr/bin/python3, Debian's torch)]
# Exit: 0 passed, 1 failed, 77 skipped (not root, Slurm or munge not installed, or the daemons
# did not come up: the reason is printed, never a silent pass).
set -u
zen=$1
pypath=${2:-}
py=${3:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/../.." && pwd)

skip() {
    echo "SKIPPED: $*"
    exit 77
}
[ "$(id -u)" -eq 0 ] || skip "the daemons run as root here (slurmd starts tasks as their user); not root"
for c in munged slurmctld slurmd srun sbatch sinfo; do
    command -v "$c" >/dev/null 2>&1 ||
        skip "$c not found: install Debian's slurm-wlm and munge (scripts/deps.sh --slurm)"
done

tmp=$(mktemp -d /tmp/zen-slurm.XXXXXX)
cleanup() {
    for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    sleep 0.5
    for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/pid"; do
        [ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
chmod 755 "$tmp"
# two ports for the daemons, between zen's Slurm port range (20000-29999) and Linux's ephemeral
# ports (32768 and up), not listened on now (no python here: it costs seconds on a loaded box)
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((30000 + RANDOM % 2700))
        if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
            echo "$p"
            return
        fi
    done
    echo 30999
}
host=$(hostname -s)
cpus=$(nproc)
[ "$cpus" -ge 4 ] || cpus=4 # srun -n 4 on a 2-core box: the node claims 4 (config_overrides)

mkdir -p "$tmp/state" "$tmp/spool" "$tmp/munge"
chmod 700 "$tmp/munge"
head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
munged --force --socket="$tmp/munge/sock" --key-file="$tmp/munge/munge.key" \
    --pid-file="$tmp/munge/pid" --log-file="$tmp/munge/log" --seed-file="$tmp/munge/seed" ||
    skip "munged did not start: $(tail -n 3 "$tmp/munge/log" 2>/dev/null)"

cat >"$tmp/slurm.conf" <<CONF
ClusterName=zentest
SlurmctldHost=$host
SlurmUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ReturnToService=2
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=zen Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -f "$SLURM_CONF" || skip "slurmctld did not start: $(tail -n 3 "$tmp/slurmctld.log" 2>/dev/null)"
slurmd -f "$SLURM_CONF" || skip "slurmd did not start: $(tail -n 3 "$tmp/slurmd.log" 2>/dev/null)"
up=0
for _ in $(seq 1 60); do
    state=$(sinfo -h -o %T 2>/dev/null)
    case "$state" in idle*) up=1 && break ;; esac
    sleep 0.25
done
[ "$up" -eq 1 ] || skip "the node did not become idle in 15 s (state '${state:-none}'): " \
    "$(tail -n 3 "$tmp/slurmctld.log" "$tmp/slurmd.log" 2>/dev/null | tr '\n' ' ')"
echo "[${SECONDS} s] slurm up: $(sinfo -h -o '%P %D %T %N %c') ($(slurmd -V))"

# whatever the caller's environment says, the ranks must come from Slurm alone
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT ZEN_RANK \
    ZEN_WORLD_SIZE ZEN_MASTER_ADDR ZEN_MASTER_PORT ZEN_LOCAL_RANK ZEN_LOCAL_SIZE
failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}

# 1. sizes 8 B .. 32 KiB by 8: 5 sizes, out of place and in place
out=$(timeout 60 srun -n 4 "$zen" bench allreduce -b 8 -e 32K -f 8 -w 1 -n 3 --check --json 2>"$tmp/bench.err")
rc=$?
echo "$out" | head -n 2
lines=$(echo "$out" | grep -c '"op":"allreduce"')
good=$(echo "$out" | grep '"ranks":4' | grep -v '"transport":"inproc"' | grep -c '"wrong":0')
[ "$rc" -eq 0 ] || fail "srun zen bench exited $rc: $(tail -n 5 "$tmp/bench.err")"
[ "$lines" -eq 10 ] && [ "$good" -eq 10 ] ||
    fail "srun -n 4 zen bench: $lines result lines, $good of 4 ranks, not inproc, wrong 0 (want 10 and 10)"

# srun --mpi=pmi2 sets PMI_SIZE: zen still runs its own transport, not an MPI that cannot start
out=$(timeout 60 srun --mpi=pmi2 -n 2 "$zen" bench allreduce -b 1K -e 1K -w 1 -n 2 --check \
    --json 2>"$tmp/pmi2.err")
rc=$?
good=$(echo "$out" | grep '"ranks":2' | grep -v '"transport":"inproc"' | grep -c '"wrong":0')
[ "$rc" -eq 0 ] && [ "$good" -eq 2 ] ||
    fail "srun --mpi=pmi2 -n 2 zen bench: exit $rc, $good good lines of 2: $(tail -n 3 "$tmp/pmi2.err")"
echo "[${SECONDS} s] bench done"
# 2. torch DDP with the zen backend: a corpus from docs/ keeps it short
if [ -n "$pypath" ] && PYTHONPATH=$pypath "$py" -c "import zen_torch" 2>/dev/null; then
    cat "$root"/docs/*.md >"$tmp/corpus.txt"
    out=$(PYTHONPATH=$pypath OMP_NUM_THREADS=1 timeout 90 srun -n 2 "$py" \
        "$root/examples/torch_ddp_kjv.py" --backend zen --steps 3 --batch 32 \
        --corpus "$tmp/corpus.txt" 2>"$tmp/ddp.err")
    rc=$?
    echo "$out" | grep -E "^backend|^median"
    [ "$rc" -eq 0 ] || fail "srun python3 torch_ddp_kjv.py exited $rc: $(tail -n 8 "$tmp/ddp.err")"
    echo "$out" | grep -q "^backend zen, 2 ranks" ||
        fail "torch_ddp_kjv.py did not run as 2 ranks of backend zen"
    echo "$out" | grep -q "^median .* (zen, 2 ranks)" || fail "torch_ddp_kjv.py did not finish"
else
    echo "note: torch part left out (zen_torch not built or not importable in '${pypath}')"
fi

echo "[${SECONDS} s] torch done"
# 3. sbatch: the batch script is one process; its srun tasks are the ranks
cat >"$tmp/job.sh" <<JOB
#!/bin/sh
$zen info --json | head -n 1
srun $zen info --json | grep '"launcher"'
JOB
jid=$(sbatch --parsable -n 2 -o "$tmp/job.out" -D "$tmp" "$tmp/job.sh") || fail "sbatch refused the job"
for _ in $(seq 1 80); do
    [ -z "$(squeue -h -j "$jid" 2>/dev/null)" ] && break
    sleep 0.25
done
batch=$(cat "$tmp/job.out" 2>/dev/null)
echo "$batch"
[ "$(echo "$batch" | grep -c '"launcher":"none"')" -eq 1 ] || fail "sbatch script itself taken as a rank"
[ "$(echo "$batch" | grep -c '"launcher":"srun","rank":[01],"world_size":2')" -eq 2 ] ||
    fail "sbatch's srun tasks are not ranks 0 and 1 of 2"

echo "[${SECONDS} s] sbatch done"
[ "$failed" -eq 0 ] && echo "PASSED: srun and sbatch under a single-node Slurm"
exit "$failed"
