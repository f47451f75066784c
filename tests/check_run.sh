#!/bin/sh
# Run a command for a ctest and judge its exit status as well as its output. A test with only
# PASS_REGULAR_EXPRESSION passes on the output alone: a rank that crashed, or that leaked and
# exited 23 under LeakSanitizer, after printing the expected line still passed.
#
# usage: check_run.sh [-x STATUS] [-r STATUSES] [-m ERE]... [-n ERE]... -- COMMAND [ARG]...
#
#   -x STATUS    the exit status COMMAND must have (default 0). Anything else fails, and a
#                status of 128 + N is reported as death by signal N.
#   -r STATUSES  comma-separated exit statuses a rank of `zen launch` may report in its
#                "zen launch: rank R exited with status S" lines (default 1, the status of a zen
#                command that reports its own error); a signal, a sanitizer's exit code or any
#                other status in such a line fails the test. Also fails when zen launch had to
#                terminate ranks that did not exit on their own.
#   -m ERE       a line of the output (stdout and stderr together) must match ERE (grep -E);
#                repeatable, all must match.
#   -n ERE       no line may match ERE; repeatable.
#
# Always a failure: a sanitizer report (AddressSanitizer, LeakSanitizer, UndefinedBehavior-
# Sanitizer, ThreadSanitizer) anywhere in the output, whatever the exit status.
# The output is printed whole, then a "check_run:" line per failed check.
expect=0
ranks=1
musts=""
nots=""
nl='
'
while [ $# -gt 0 ]; do
    case "$1" in
    -x) expect=$2; shift 2 ;;
    -r) ranks=$2; shift 2 ;;
    -m) musts="$musts$2$nl"; shift 2 ;;
    -n) nots="$nots$2$nl"; shift 2 ;;
    --) shift; break ;;
    *) echo "check_run: unknown option $1" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "check_run: no command" >&2; exit 2; }

out=$(mktemp "${TMPDIR:-/tmp}/check_run.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"

fail=0
bad() {
    echo "check_run: FAIL: $*"
    fail=1
}

if [ "$rc" -ne "$expect" ]; then
    if [ "$rc" -gt 128 ]; then
        bad "exit status $rc (killed by signal $((rc - 128))), expected $expect"
    else
        bad "exit status $rc, expected $expect"
    fi
fi

if grep -Eq 'ERROR: (Address|Leak|Memory)Sanitizer|WARNING: ThreadSanitizer|^SUMMARY: [A-Za-z]+Sanitizer|runtime error: ' "$out"; then
    bad "a sanitizer reported an error (see above)"
fi

# every rank zen launch reports as failed must have failed with an allowed status
grep -E '^zen launch: rank [0-9]+ exited with status ' "$out" | while IFS= read -r line; do
    st=${line#*exited with status }
    st=${st%% *}
    case ",$ranks," in
    *",$st,"*) ;;
    *) echo "check_run: FAIL: $line (allowed: $ranks)"; exit 1 ;;
    esac
done || fail=1
if grep -Eq '^zen launch: terminating the [0-9]+ rank' "$out"; then
    bad "zen launch terminated ranks that did not exit on their own"
fi

# each pattern on its own line of $musts / $nots
printf '%s' "$musts" | while IFS= read -r re; do
    grep -Eq -e "$re" "$out" || { echo "check_run: FAIL: no line matches: $re"; exit 1; }
done || fail=1
printf '%s' "$nots" | while IFS= read -r re; do
    if grep -Eq -e "$re" "$out"; then
        echo "check_run: FAIL: a line matches: $re"
        exit 1
    fi
done || fail=1

if [ "$fail" -eq 0 ]; then
    echo "check_run: ok (exit status $rc)"
fi
exit "$fail"
