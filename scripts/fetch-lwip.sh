#!/usr/bin/env bash
# Obtains lwIP 2.1.3 from Debian's source package into .deps/ (never into the
# repository): stack/net/lwip/ builds its core with our own lwipopts.h.
# Idempotent: a stamp file records the unpacked version, and a second run
# does nothing. Needs the deb-src entry that scripts/setup.sh installs, and
# root only if that entry's package lists were never fetched.
#
# Debian's patches are applied only where they touch what we compile
# (src/core, src/include, src/netif/ethernet.c). In 2.1.3+dfsg1-2 that is
# patch9350, patch9807 and max_sockets, which only add socket/tcpip-thread
# options that stay off in our build; 'port' (the unix/Hurd sys_arch), 'cmake'
# and the PPP CVE fix touch files we never compile. The filter keeps a future
# Debian revision's core fix from being skipped silently.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=${SOFTRDMA_DEPS_DIR:-$ROOT/.deps}
VERSION=2.1.3
DEST=$DEPS/lwip-$VERSION
STAMP=$DEST/.softrdma-stamp

if [[ -f $STAMP && -f $DEST/src/core/tcp.c ]]; then
  echo "fetch-lwip.sh: $(cat "$STAMP") already in $DEST"
  exit 0
fi

mkdir -p "$DEPS/src"
cd "$DEPS/src"
if ! ls lwip_"$VERSION"*.orig.tar.* >/dev/null 2>&1 || ! ls lwip_"$VERSION"*.debian.tar.* >/dev/null 2>&1; then
  if ! apt-get source --download-only lwip >/dev/null 2>&1; then
    # The source lists may never have been fetched on this machine.
    if [[ $(id -u) -ne 0 ]]; then
      echo "fetch-lwip.sh: 'apt-get source lwip' failed; run scripts/setup.sh as root first" >&2
      exit 1
    fi
    apt-get update -qq
    apt-get source --download-only lwip >/dev/null
  fi
fi

orig=$(ls lwip_"$VERSION"*.orig.tar.* | head -n1)
debian=$(ls lwip_"$VERSION"*.debian.tar.* | head -n1)
pkgver=$(basename "$debian" | sed -e 's/^lwip_//' -e 's/\.debian\.tar\..*$//')

work=$(mktemp -d "$DEPS/.lwip-unpack.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$orig"
tar -C "$work" -xf "$debian"
top=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'lwip*' | head -n1)
[[ -n $top && -f $top/src/core/tcp.c ]] || { echo "fetch-lwip.sh: unexpected tarball layout" >&2; exit 1; }

CORE_RE='^[ab]/(src/core/|src/include/|src/netif/ethernet\\.c)'
applied=()
while read -r patch; do
  patch=${patch%%#*}
  patch=${patch//[[:space:]]/}
  [[ -z $patch ]] && continue
  # Keep only the per-file sections that touch what we compile (a patch
  # may also touch port/ files that are not in the orig tarball).
  awk -v keep="$CORE_RE" '
    /^--- / { hold = $0; next }
    /^\+\+\+ / { on = ($2 ~ keep); if (on) print hold; hold = ""; if (on) print; next }
    /^(diff |Index: )/ { on = 0; next }
    on { print }
  ' "$work/debian/patches/$patch" > "$work/filtered.patch"
  if [[ -s $work/filtered.patch ]]; then
    patch -d "$top" -p1 --quiet --forward --batch < "$work/filtered.patch"
    applied+=("$patch")
  fi
done < "$work/debian/patches/series"

rm -rf "$DEST"
mv "$top" "$DEST"
echo "lwip $pkgver; patches: ${applied[*]:-none}" > "$STAMP"
echo "fetch-lwip.sh: $(cat "$STAMP") -> $DEST"
