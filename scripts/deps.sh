#!/usr/bin/env bash
# Install what zen needs to build, test and run, from Debian packages. Idempotent: installs only
# what is missing, and runs `apt-get update` only when something is.
# --slurm also installs a Slurm and munge (slurmctld, slurmd, slurm-client, munge; 6 packages,
# about 5 MB) for the `slurm` ctest label (tests/slurm/slurm-test.sh), which skips without them.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang clang-format
  libcmocka-dev libopenblas-dev libopenmpi-dev openmpi-bin libsodium-dev
  bible-kjv dict-gcide python3 python3-matplotlib
  python3-dev python3-torch libtorch-dev pybind11-dev
)
if [ "${1:-}" = "--slurm" ]; then
  packages+=(slurmctld slurmd slurm-client munge)
elif [ $# -gt 0 ]; then
  echo "usage: scripts/deps.sh [--slurm]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "scripts/deps.sh: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "scripts/deps.sh: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# wait for another apt or dpkg (an unattended upgrade) instead of failing at once
lock=(-o DPkg::Lock::Timeout=600)
$SUDO apt-get "${lock[@]}" update -qq
$SUDO apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
