#!/usr/bin/env python3
"""A stranger process on the shm setup sockets, as any local user could be: start a 4-rank shm
job under `zen launch` and connect silently to every `@zen-shm-` socket of the job's ranks as
soon as it shows in /proc/net/unix, holding the connections until the job ends. The job must
verify its allreduces and exit 0 (before, one silent connection stalled the hand-over until
ZEN_TIMEOUT_S and the job failed blaming live ranks). usage: shm_setup_strangers.py ZEN"""
import os
import socket
import subprocess
import sys
import time


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def descends_from(pid, root):
    while pid > 1:
        if pid == root:
            return True
        pid = parent_of(pid)
    return False


def main():
    zen = sys.argv[1]
    env = dict(os.environ, ZEN_TIMEOUT_S="20")
    t0 = time.time()
    job = subprocess.Popen([zen, "launch", "-n", "4", "--transport", "shm", "--", zen, "bench",
                            "allreduce", "-c", "-b", "1K", "-e", "64K", "-f", "8", "-w", "1",
                            "-n", "2", "--json"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    held, seen = [], set()
    while job.poll() is None and time.time() - t0 < 60:
        with open("/proc/net/unix") as f:
            names = [line.split()[-1] for line in f if "@zen-shm-" in line]
        for name in names:
            if name in seen:
                continue
            try:
                pid = int(name.split("-")[2])
            except (IndexError, ValueError):
                continue
            if not descends_from(pid, job.pid):  # other jobs on this machine are not ours
                continue
            seen.add(name)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect("\0" + name[1:])
                held.append(s)
            except OSError as e:
                print(f"could not connect to {name}: {e}")
    out, err = job.communicate(timeout=60)
    out, err = out.decode(), err.decode()
    secs = time.time() - t0
    verified = out.count('"wrong":0')
    print(f"job exit {job.returncode} in {secs:.2f} s, {len(held)} of {len(seen)} setup "
          f"sockets held, {verified} verified result lines")
    ok = job.returncode == 0 and verified > 0 and '"wrong":' not in out.replace('"wrong":0', "")
    if not ok or not held:
        sys.stdout.write(err)
    if not held:
        print("FAIL: no setup socket was reached before the job finished its setup")
    return 0 if ok and held else 1


if __name__ == "__main__":
    sys.exit(main())
