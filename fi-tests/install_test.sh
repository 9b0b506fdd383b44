#!/usr/bin/env bash
# `cmake --install` puts the provider where Debian's libfabric looks for
# providers by default (the FI_PROVIDER_PATH default that `fi_info -e`
# prints), exporting only fi_prov_ini; loaded from there, fi_info lists
# softrdma and softrdma;ofi_rxm, and `fi_info -e` its FI_SOFTRDMA_* settings.
# Installs under a scratch DESTDIR: the system is left alone.
#
# usage: install_test.sh <build-dir>
set -u
build=${1:?usage: install_test.sh <build-dir>}
fail() { echo "install_test: FAIL: $*"; exit 1; }

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT

default_dir=$(fi_info -e 2>/dev/null | sed -n 's/.*(default: \(\/[^)]*\)).*/\1/p' |
  grep -m1 'libfabric$')
[[ -n $default_dir ]] || fail "fi_info -e does not name libfabric's default provider path"

DESTDIR=$dest cmake --install "$build" >"$dest.log" 2>&1 || { cat "$dest.log"; fail "cmake --install"; }
rm -f "$dest.log"
lib=$dest$default_dir/libsoftrdma-fi.so
[[ -f $lib ]] || fail "no $lib; installed: $(cd "$dest" && find . -type f)"

exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}')
[[ $exported == fi_prov_ini ]] || fail "exports: $exported (want only fi_prov_ini)"

export FI_PROVIDER_PATH=$dest$default_dir
fi_info -p softrdma -t FI_EP_MSG 2>&1 | grep -q "provider: softrdma$" ||
  fail "fi_info -p softrdma does not list the installed provider"
FI_PROVIDER=softrdma fi_info -t FI_EP_RDM 2>&1 | grep -q "provider: softrdma;ofi_rxm" ||
  fail "FI_PROVIDER=softrdma fi_info -t FI_EP_RDM does not show softrdma;ofi_rxm"
params=$(fi_info -e 2>&1 | grep -c "^# FI_SOFTRDMA_")
((params >= 8)) || fail "fi_info -e lists $params FI_SOFTRDMA_* parameters"
echo "install_test: ok: $default_dir/libsoftrdma-fi.so, only fi_prov_ini exported, $params parameters"
