#!/usr/bin/env bash
# The Debian package, as an administrator meets it: built by CPack from this
# build, installed with dpkg, used with nothing set (the provider found in
# libfabric's own directory, the tools on PATH, Open MPI's parameter set by
# name), then removed without a trace. Files it would replace (a
# `cmake --install` of the provider, say) are put back afterwards; a softrdma
# package already installed is refused, not replaced. Fails, never skips.
#
# usage: package_test.sh <build dir>
set -uo pipefail
build=${1:?usage: package_test.sh <build dir>}
[[ $(id -u) -eq 0 ]] || { echo "package_test: needs root (dpkg -i)" >&2; exit 1; }
tmp=$(mktemp -d)
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
cleanup() {
  dpkg -r softrdma >/dev/null 2>&1
  local f dst
  while read -r f; do  # dpkg -r may have taken the emptied directories too
    dst=${f#"$tmp/keep"}
    mkdir -p "${dst%/*}" && cp -a "$f" "$dst"
  done < <(find "$tmp/keep" -type f 2>/dev/null)
  rm -rf "$tmp"
}
trap cleanup EXIT
dpkg-query -W -f='${Status}' softrdma 2>/dev/null | grep -q "install ok installed" &&
  fail "a softrdma package is installed on this host; package_test installs and removes its own, so remove it first"

(cd "$build" && cpack -G DEB -B "$tmp" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack"; }
deb=$(ls "$tmp"/softrdma_*.deb 2>/dev/null | head -1)
[[ -n $deb ]] || fail "no .deb in $tmp"
provdir=$(pkg-config --variable=libdir libfabric)/libfabric
contents=$(dpkg-deb -c "$deb")
unit=/usr/lib/systemd/system/softrdma-switch@.service
for f in "$provdir/libsoftrdma-fi.so" "${provdir%/*}/softrdma/xdp_steer.bpf.o" \
         "${provdir%/*}/softrdma/tc_steer.bpf.o" /usr/bin/srdma_perf /usr/bin/srdma_soak \
         /usr/sbin/softrdma-switch "$unit" \
         /usr/include/softrdma/fi_ext_softrdma.h /usr/share/openmpi/amca-param-sets/softrdma; do
  grep -q " \.$f\$" <<<"$contents" || fail "$f not in the package"
done
depends=$(dpkg-deb -f "$deb" Depends)
for d in libfabric1 librte-eal23 librte-net-memif23 librte-mempool-ring23; do
  grep -q "$d" <<<"$depends" || fail "Depends lacks $d: $depends"
done

# What the package would overwrite, kept to be put back at exit.
mkdir -p "$tmp/keep"
while read -r f; do
  [[ -e $f ]] || continue
  mkdir -p "$tmp/keep${f%/*}" && cp -a "$f" "$tmp/keep$f" || fail "cannot keep $f"
done < <(awk '$1 ~ /^-/ { print substr($6, 2) }' <<<"$contents")
dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
dpkg -L softrdma | grep -qx "$provdir/libsoftrdma-fi.so" || fail "dpkg -L lacks the provider"

unset FI_PROVIDER_PATH
fi_info -p softrdma -t FI_EP_MSG | grep -q "provider: softrdma" || fail "fi_info -p softrdma lists nothing"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
timeout 60 fi_pingpong -p softrdma -e msg -B "$port" -S 4096 -I 200 -c >"$tmp/srv.log" 2>&1 &
srv=$!
sleep 1
if ! timeout 60 fi_pingpong -p softrdma -e msg -P "$port" -S 4096 -I 200 -c 127.0.0.1 >"$tmp/cli.log" 2>&1; then
  cat "$tmp/cli.log" "$tmp/srv.log"; fail "fi_pingpong over the installed provider"
fi
wait "$srv" || { cat "$tmp/srv.log"; fail "fi_pingpong server"; }
grep -q "4k" "$tmp/cli.log" || { cat "$tmp/cli.log"; fail "fi_pingpong printed no result"; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
timeout 60 srdma_perf -p "$port" >"$tmp/perf-srv.log" 2>&1 &
srv=$!
sleep 1
timeout 60 srdma_perf -p "$port" -o send -t lat -s 64 -n 1000 127.0.0.1 >"$tmp/perf.log" 2>&1 \
  || { cat "$tmp/perf.log" "$tmp/perf-srv.log"; fail "srdma_perf from /usr/bin"; }
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null

# MPI with the installed parameter set, found by name: two ranks on the
# installed provider, the MTL naming it.
timeout -k 10 120 mpirun --allow-run-as-root --oversubscribe -np 2 --tune softrdma \
  --mca mtl_ofi_verbose 1 "$build/mpi-tests/mpi_p2p" >"$tmp/mpi.log" 2>&1 \
  || { cat "$tmp/mpi.log"; fail "mpirun --tune softrdma"; }
n=$(grep -c 'mtl:ofi:prov: softrdma;ofi_rxm' "$tmp/mpi.log")
[[ $n == 2 ]] || { cat "$tmp/mpi.log"; fail "$n of 2 ranks chose softrdma;ofi_rxm"; }
grep -q "^PASS " "$tmp/mpi.log" || { cat "$tmp/mpi.log"; fail "mpi_p2p printed no PASS"; }

# The switch's unit starts the installed switch.
grep -qx "ExecStart=/usr/sbin/softrdma-switch %i" "$unit" || fail "$unit: ExecStart is not the installed switch"
if command -v systemd-analyze >/dev/null 2>&1; then
  systemd-analyze verify "${unit%@.service}@eth0.service" >"$tmp/verify.log" 2>&1 ||
    { cat "$tmp/verify.log"; fail "systemd-analyze verify $unit"; }
fi

# Across two namespace hosts with what the package installed, as users run
# it: the installed softrdma-switch on each host (it loads the package's
# BPF programs, outside any build tree), ranks as nobody.
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../fi-tests/hosts_test.sh" "$provdir" 200 2 /usr/sbin/softrdma-switch /usr/bin/srdma_soak \
  >"$tmp/hosts.log" 2>&1 \
  || { cat "$tmp/hosts.log"; fail "fi_pingpong across hosts over the installed provider and switch"; }

dpkg -r softrdma >/dev/null 2>&1 || fail "dpkg -r"
[[ ! -e $provdir/libsoftrdma-fi.so ]] || fail "the provider stayed after dpkg -r"
[[ ! -e /usr/bin/srdma_perf ]] || fail "srdma_perf stayed after dpkg -r"
[[ ! -e /usr/sbin/softrdma-switch && ! -e $unit ]] || fail "the switch stayed after dpkg -r"
[[ ! -e ${provdir%/*}/softrdma/xdp_steer.bpf.o && ! -e ${provdir%/*}/softrdma/tc_steer.bpf.o ]] ||
  fail "the BPF programs stayed after dpkg -r"
echo "package_test: $(basename "$deb") built, installed, used (fi_pingpong -c, srdma_perf, mpirun --tune softrdma, fi_pingpong across hosts through the switch), removed"
