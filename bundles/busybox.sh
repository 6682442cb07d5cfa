#!/usr/bin/env bash
# Build a minimal OCI bundle whose rootfs is a static busybox.
#
# usage: bundles/busybox.sh OUTDIR CORDON_BIN
#
#   OUTDIR      bundle directory to create (e.g. bundles/busybox); gets
#               OUTDIR/rootfs and OUTDIR/config.json
#   CORDON_BIN  runtime binary used for `spec --bundle OUTDIR` (cordon, or runc)
#
# Environment:
#   PROBES_DIR  if set and a directory, its regular files (static test probes)
#               are copied into OUTDIR/rootfs/usr/local/bin
#   BUSYBOX     static busybox to copy (default /bin/busybox from busybox-static)
#
# Idempotent: OUTDIR/rootfs is removed and recreated on every run (cheap),
# config.json is regenerated.
set -euo pipefail

die() { echo "busybox.sh: error: $*" >&2; exit 1; }
log() { echo "busybox.sh: $*" >&2; }

[[ $# -eq 2 ]] || { echo "usage: $0 OUTDIR CORDON_BIN" >&2; exit 2; }
OUTDIR_ARG=$1
CORDON_BIN=$2
BUSYBOX=${BUSYBOX:-/bin/busybox}

command -v jq >/dev/null || die "jq not found (apt-get install -y jq)"
command -v "$CORDON_BIN" >/dev/null || [[ -x $CORDON_BIN ]] || die "runtime binary '$CORDON_BIN' not found or not executable"
[[ -x $BUSYBOX ]] || die "$BUSYBOX not found (apt-get install -y busybox-static)"
# A dynamically linked busybox would not run inside the empty rootfs.
if command -v file >/dev/null && ! file -L "$BUSYBOX" | grep -q 'statically linked'; then
    die "$BUSYBOX is not statically linked (install busybox-static)"
fi
[[ -n $OUTDIR_ARG ]] || die "OUTDIR must not be empty"

mkdir -p "$OUTDIR_ARG"
OUTDIR=$(cd "$OUTDIR_ARG" && pwd)
[[ $OUTDIR != / ]] || die "refusing to use / as OUTDIR"
ROOTFS="$OUTDIR/rootfs"

# Fresh rootfs every time. Never cross into something mounted below it (a
# crashed runtime could in theory leave a mount behind).
if [[ -e $ROOTFS ]]; then
    if awk -v d="$ROOTFS" '$2 == d || index($2, d "/") == 1 { f = 1 } END { exit !f }' /proc/self/mounts; then
        die "something is still mounted below $ROOTFS; unmount it first (see /proc/self/mounts)"
    fi
    rm -rf --one-file-system "$ROOTFS"
fi

mkdir -p "$ROOTFS"/{bin,proc,sys,dev,tmp,mnt,etc,root,home/app,usr/local/bin,var}
chmod 1777 "$ROOTFS/tmp"
chmod 0700 "$ROOTFS/root"
chown 1000:1000 "$ROOTFS/home/app"

# busybox and one symlink per applet, all in /bin (on the default PATH).
install -m 0755 "$BUSYBOX" "$ROOTFS/bin/busybox"
applets=$("$ROOTFS/bin/busybox" --list) || die "'$ROOTFS/bin/busybox --list' failed"
[[ -n $applets ]] || die "busybox --list printed no applets"
while read -r applet; do
    [[ -n $applet && $applet != busybox && $applet != */* ]] || continue
    ln -sf busybox "$ROOTFS/bin/$applet"
done <<<"$applets"
[[ -L $ROOTFS/bin/sh ]] || die "busybox has no 'sh' applet"

cat >"$ROOTFS/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
app:x:1000:1000:app:/home/app:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$ROOTFS/etc/group" <<'EOF'
root:x:0:
app:x:1000:
extra:x:2000:app
nogroup:x:65534:
EOF
echo cordon >"$ROOTFS/etc/hostname"
cat >"$ROOTFS/etc/hosts" <<'EOF'
127.0.0.1 localhost
::1 localhost
EOF

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

# config.json: `runc spec` refuses to overwrite an existing one.
rm -f "$OUTDIR/config.json"
"$CORDON_BIN" spec --bundle "$OUTDIR" ||
    die "'$CORDON_BIN spec --bundle $OUTDIR' failed"
[[ -s $OUTDIR/config.json ]] || die "'$CORDON_BIN spec' did not write $OUTDIR/config.json"
jq '.process.terminal = false
    | .process.args = ["sh"]
    | .root.readonly = true' \
    "$OUTDIR/config.json" >"$OUTDIR/config.json.tmp" ||
    die "editing $OUTDIR/config.json with jq failed"
mv "$OUTDIR/config.json.tmp" "$OUTDIR/config.json"

log "bundle ready: $OUTDIR"
