#!/usr/bin/python3
"""zen(1) agrees with the commands' --help (issue #37): every option the man page names for a
command is one that command's --help lists, and the transports the man page gives for
--transport are those --help gives.

usage: man_help_check.py ZEN_BIN MAN_PAGE
Exit 0 when they agree; else 1, one line per disagreement.
"""
import re
import subprocess
import sys

OPT = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")


def plain(roff):
    """The man page's text without font requests and with \\- as -."""
    text = roff.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")
    return "\n".join(re.sub(r"^\.(B|BR|BI|RB|I|TP|PP)\b ?", "", ln).replace('"', "")
                     for ln in text.splitlines())


def between(text, start, end):
    """The text from the first line starting with start up to the next line starting with end."""
    i = text.index(start)
    j = text.find("\n" + end, i + len(start))
    return text[i:j if j >= 0 else len(text)]


def help_of(zen, cmd):
    out = subprocess.run([zen] + cmd.split() + ["--help"], capture_output=True, text=True,
                         timeout=30)
    return out.stdout + out.stderr


def main():
    zen, page = sys.argv[1], sys.argv[2]
    with open(page) as f:
        text = plain(f.read())
    # (command whose --help must list them, the man page's text that names them)
    sections = [
        ("bench allreduce", between(text, "Common to the commands", "A numeric value")),
        ("bench allreduce", between(text, "zen bench\n(dense)", "zen bench sparse")),
        ("bench sparse", between(text, "zen bench sparse\n:", "zen bench topk")),
        ("bench topk", between(text, "zen bench topk\n:", "zen train")),
        ("train", between(text, "zen train\n: model shape", "zen simulate")),
        ("simulate", between(text, "zen simulate\n:", ".SH ENVIRONMENT")),
        ("launch", between(text, "launch -n", "simulate")),
    ]
    bad = compared = 0
    for cmd, part in sections:
        helptext = help_of(zen, cmd)
        have = set(OPT.findall(helptext))
        opts = sorted(set(OPT.findall(part)) - {"--"})
        if not opts:
            print(f"man_help_check: no options found in zen(1)'s text for `zen {cmd}`")
            bad += 1
        compared += len(opts)
        for opt in opts:
            if opt not in have:
                print(f"man_help_check: zen(1) names {opt} for `zen {cmd}`, "
                      f"but `zen {cmd} --help` does not list it")
                bad += 1
    # the transports of --transport: those of bench's --help, all named in the man page
    entry = between(text, "--transport  T", "--ranks  N")
    helptext = help_of(zen, "bench allreduce")
    for word in ("inproc", "auto", "shm", "tcp", "mpi"):
        in_help = re.search(rf"\b{word}\b", between(helptext, "  --transport", "  --")) is not None
        in_man = re.search(rf"\b{word}\b", entry) is not None
        if in_help != in_man:
            print(f"man_help_check: --transport {word}: in zen(1) {in_man}, in --help {in_help}")
            bad += 1
    # the dense collectives `zen bench` times: the man page's list is --help's usage list, and each
    # one runs (a word only in one of them, or one --help names but `zen bench` refuses, fails)
    man_line = re.search(r"^bench (allreduce\|[a-z_|]+)", text, re.M)
    man_kinds = set(man_line.group(1).split("|")) if man_line else set()
    help_kinds = set()
    for m in re.finditer(r"zen bench ([a-z_|]+) \[OPTIONS\]", help_of(zen, "bench allreduce")):
        help_kinds |= set(m.group(1).split("|")) - {"p2p"}
    if not man_kinds or man_kinds != help_kinds:
        print(f"man_help_check: zen(1) lists the dense benchmarks {sorted(man_kinds)}, "
              f"--help {sorted(help_kinds)}")
        bad += 1
    for kind in sorted(help_kinds):
        if "usage" not in help_of(zen, f"bench {kind}"):
            print(f"man_help_check: `zen bench {kind} --help` prints no usage")
            bad += 1
    print(f"man_help_check: {compared} options in {len(sections)} lists and the transports "
          f"compared, {bad} disagreement(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
