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
  libbpf-dev libxdp-dev clang-14
  libisal-dev libsodium-dev
  liblwip-dev
  openmpi-bin libopenmpi-dev
  python3 python3-matplotlib
)

# Debian's source archive, for `apt-get source lwip` (lwIP is built from its
# Debian source package with our own lwipopts.h; see stack/net/lwip/).
SRC_LIST=/etc/apt/sources.list.d/softrdma-src.sources
need_update=0
if [[ ! -f $SRC_LIST && $(id -u) -eq 0 ]]; then
  cat > "$SRC_LIST" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  need_update=1
fi

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
  need_update=0
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ((need_update)); then apt-get update -qq; fi
echo "setup.sh: all packages present"
