#!/usr/bin/env bash
# Installs every Debian package SoftRDMA needs to build, test and benchmark.
# Idempotent; run as root (CI and the README's commands call it).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev valgrind
  tshark iproute2 ethtool
  libfabric-dev libfabric-bin
  libdpdk-dev dpdk
  liblwip-dev
  openmpi-bin libopenmpi-dev
  python3
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup.sh: all packages present"
