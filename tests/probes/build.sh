#!/usr/bin/env bash
# Compile the static test probe(s) used inside cordon containers.
#
# usage: tests/probes/build.sh OUTDIR
#
# Writes OUTDIR/probe (a static x86_64 binary). Works from any cwd.
# Environment: CC (default gcc), EXTRA_CFLAGS (appended).
set -euo pipefail

die() { echo "probes/build.sh: error: $*" >&2; exit 1; }

[[ $# -eq 1 && -n $1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
OUTDIR=$1
SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CC=${CC:-gcc}

command -v "$CC" >/dev/null || die "C compiler '$CC' not found (apt-get install -y gcc libc6-dev)"
mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"

# Compile to a temporary file first so a failed build never leaves a stale or
# truncated OUTDIR/probe behind.
tmp=$(mktemp "$OUTDIR/.probe.XXXXXX")
trap 'rm -f "$tmp"' EXIT
# shellcheck disable=SC2086
if ! "$CC" -static -O2 -pthread -Wall -Wextra ${EXTRA_CFLAGS:-} \
        -o "$tmp" "$SRC_DIR/probe.c"; then
    die "compiling $SRC_DIR/probe.c failed (static linking needs libc6-dev with libc.a)"
fi
chmod 0755 "$tmp"
mv -f "$tmp" "$OUTDIR/probe"
trap - EXIT
echo "probes/build.sh: built $OUTDIR/probe" >&2
