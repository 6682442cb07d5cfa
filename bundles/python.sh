#!/usr/bin/env bash
# Build an OCI bundle whose rootfs is a Debian bookworm "minbase" system with
# python3 and procps (free, top, ps: the /proc views are tested with them)
# installed, and what the workloads suite runs as agents do: python3-venv
# (pip through ensurepip), git, curl, gcc, make.
#
# usage: bundles/python.sh OUTDIR CORDON_BIN
#
#   OUTDIR      bundle directory to create (e.g. bundles/python); gets
#               OUTDIR/rootfs and OUTDIR/config.json
#   CORDON_BIN  runtime binary used for `spec --bundle OUTDIR` (cordon, or runc)
#
# Environment:
#   PROBES_DIR  if set and a directory, its regular files (static test probes)
#               are copied into OUTDIR/rootfs/usr/local/bin
#   DEBIAN_MIRROR  mirror for debootstrap (default http://deb.debian.org/debian)
#
# The debootstrapped rootfs is cached in bundles/cache/python-rootfs (next to
# this script); debootstrap only runs when the cache lacks one of CACHE_NEEDS.
# It runs into a temporary directory that is renamed into place on success, so
# an interrupted run never leaves a half-built cache. OUTDIR/rootfs is a copy
# of the cache, reused as long as its stamp matches the cache's id.
#
# Idempotent: re-running rebuilds config.json and re-applies the rootfs edits.
set -euo pipefail

die() { echo "python.sh: error: $*" >&2; exit 1; }
log() { echo "python.sh: $*" >&2; }

[[ $# -eq 2 ]] || { echo "usage: $0 OUTDIR CORDON_BIN" >&2; exit 2; }
OUTDIR_ARG=$1
CORDON_BIN=$2

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT="$SCRIPT_DIR/cache"
CACHE="$CACHE_ROOT/python-rootfs"
CACHE_ID_FILE="$CACHE/.cordon-cache-id"
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# What the cache must hold; a cache without one of these is rebuilt.
PACKAGES=python3,procps,python3-venv,git,curl,ca-certificates,gcc,libc6-dev,make,nodejs
# Installed by apt in the new root after debootstrap, whose own resolver
# fails to configure npm's several hundred node-* packages.
LATER=npm
CACHE_NEEDS=(usr/bin/python3 usr/bin/free usr/bin/top usr/bin/git usr/bin/curl usr/bin/gcc usr/bin/make usr/bin/node usr/bin/npm)

[[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap and ownership of the rootfs need it)"
command -v jq >/dev/null || die "jq not found (apt-get install -y jq)"
command -v "$CORDON_BIN" >/dev/null || [[ -x $CORDON_BIN ]] || die "runtime binary '$CORDON_BIN' not found or not executable"
[[ -n $OUTDIR_ARG ]] || die "OUTDIR must not be empty"

mkdir -p "$OUTDIR_ARG"
OUTDIR=$(cd "$OUTDIR_ARG" && pwd)
[[ $OUTDIR != / ]] || die "refusing to use / as OUTDIR"
ROOTFS="$OUTDIR/rootfs"
STAMP="$OUTDIR/.rootfs-stamp"

# Unmount anything mounted below $1 (debootstrap mounts proc/sys inside its
# target; an interrupted run may leave them behind), deepest first.
umount_below() {
    local dir=$1 m
    [[ -e $dir ]] || return 0
    dir=$(realpath "$dir")
    # /proc/self/mounts field 2 is the mountpoint (octal-escaped; our paths are plain)
    awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts |
        sort -r | while read -r m; do
            umount -l "$m" 2>/dev/null || log "warning: could not unmount $m"
        done
}

# Remove a directory tree safely: never cross into mounted filesystems.
remove_tree() {
    local dir=$1
    [[ -e $dir ]] || return 0
    umount_below "$dir"
    rm -rf --one-file-system "$dir"
}

# ---------------------------------------------------------------- cache ----
build_cache() {
    command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install -y debootstrap)"
    mkdir -p "$CACHE_ROOT"
    # Leftovers of interrupted runs.
    local old
    for old in "$CACHE_ROOT"/python-rootfs.tmp.*; do
        [[ -e $old ]] || continue
        if kill -0 "${old##*.}" 2>/dev/null; then
            die "another python.sh (pid ${old##*.}) is building the cache in $old; wait for it"
        fi
        log "removing stale temporary $old"
        remove_tree "$old"
    done
    local tmp="$CACHE_ROOT/python-rootfs.tmp.$$"
    trap 'umount_below "'"$tmp"'"; rm -rf --one-file-system "'"$tmp"'"' EXIT
    log "debootstrap $SUITE (minbase + $PACKAGES) into $tmp; this takes a few minutes"
    if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp" "$MIRROR" \
            >"$CACHE_ROOT/debootstrap.log" 2>&1; then
        tail -n 30 "$CACHE_ROOT/debootstrap.log" >&2 || true
        [[ -f $tmp/debootstrap/debootstrap.log ]] && tail -n 30 "$tmp/debootstrap/debootstrap.log" >&2
        die "debootstrap failed (full log: $CACHE_ROOT/debootstrap.log)"
    fi
    log "apt-get install $LATER in $tmp"
    if ! chroot "$tmp" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $LATER" \
            >>"$CACHE_ROOT/debootstrap.log" 2>&1; then
        tail -n 30 "$CACHE_ROOT/debootstrap.log" >&2 || true
        die "apt-get install $LATER failed (full log: $CACHE_ROOT/debootstrap.log)"
    fi
    umount_below "$tmp"
    local need
    for need in "${CACHE_NEEDS[@]}"; do
        [[ -x $tmp/$need ]] || die "debootstrap finished but $tmp/$need is missing"
    done
    # Shrink: apt lists/caches are not needed inside a test container.
    rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/cache/apt/*.bin "$tmp"/var/lib/apt/lists/* 2>/dev/null || true
    printf '%s %s\n' "$(date -u +%Y%m%dT%H%M%SZ)" "$$-$RANDOM" >"$tmp/.cordon-cache-id"
    remove_tree "$CACHE"   # an old cache without one of CACHE_NEEDS, if any
    mv "$tmp" "$CACHE"
    trap - EXIT
    log "cache ready: $CACHE"
}

cache_complete() {
    local need
    for need in "${CACHE_NEEDS[@]}"; do
        [[ -x $CACHE/$need ]] || return 1
    done
}

if ! cache_complete; then
    build_cache
else
    log "using cached rootfs $CACHE"
fi
if [[ ! -f $CACHE_ID_FILE ]]; then
    # Cache from an older version of this script: give it an id now.
    printf '%s %s\n' "$(date -u +%Y%m%dT%H%M%SZ)" "$$-$RANDOM" >"$CACHE_ID_FILE"
fi
CACHE_ID=$(cat "$CACHE_ID_FILE")

# --------------------------------------------------------------- rootfs ----
if [[ -x $ROOTFS/usr/bin/python3 && -f $STAMP && $(cat "$STAMP") == "$CACHE_ID" ]]; then
    log "reusing $ROOTFS (up to date with cache)"
else
    log "copying cache into $ROOTFS"
    rm -f "$STAMP"
    remove_tree "$ROOTFS"
    cp -a "$CACHE" "$ROOTFS"
    rm -f "$ROOTFS/.cordon-cache-id"
    echo "$CACHE_ID" >"$STAMP"
fi

# Rootfs edits (idempotent).
mkdir -p "$ROOTFS"/{proc,sys,dev,tmp,etc,root,home,usr/local/bin,var}
chmod 1777 "$ROOTFS/tmp"
grep -q '^app:' "$ROOTFS/etc/group" ||
    echo 'app:x:1000:' >>"$ROOTFS/etc/group"
grep -q '^extra:' "$ROOTFS/etc/group" ||
    echo 'extra:x:2000:app' >>"$ROOTFS/etc/group"
grep -q '^app:' "$ROOTFS/etc/passwd" ||
    echo 'app:x:1000:1000:app:/home/app:/bin/sh' >>"$ROOTFS/etc/passwd"
mkdir -p "$ROOTFS/home/app"
chown 1000:1000 "$ROOTFS/home/app"
echo cordon >"$ROOTFS/etc/hostname"

# Static probe binaries.
if [[ -n ${PROBES_DIR:-} ]]; then
    if [[ -d $PROBES_DIR ]]; then
        found=0
        for f in "$PROBES_DIR"/*; do
            [[ -f $f ]] || continue
            install -m 0755 "$f" "$ROOTFS/usr/local/bin/"
            found=1
        done
        [[ $found -eq 1 ]] || log "warning: PROBES_DIR=$PROBES_DIR contains no files"
    else
        log "warning: PROBES_DIR=$PROBES_DIR does not exist; no probes copied"
    fi
fi

# ---------------------------------------------------------- config.json ----
# `runc spec` refuses to overwrite an existing config.json.
rm -f "$OUTDIR/config.json"
"$CORDON_BIN" spec --bundle "$OUTDIR" ||
    die "'$CORDON_BIN spec --bundle $OUTDIR' failed"
[[ -s $OUTDIR/config.json ]] || die "'$CORDON_BIN spec' did not write $OUTDIR/config.json"
jq '.process.terminal = false
    | .process.args = ["python3", "-c", "print(2+2)"]
    | .root.readonly = true' \
    "$OUTDIR/config.json" >"$OUTDIR/config.json.tmp" ||
    die "editing $OUTDIR/config.json with jq failed"
mv "$OUTDIR/config.json.tmp" "$OUTDIR/config.json"

log "bundle ready: $OUTDIR"
