#!/usr/bin/env bash
# Installs sandlock-oci and sandlock-cli 0.9.0 (a Landlock + seccomp-notify
# sandbox, a column of `make bench`) into DIR/bin with cargo, unless they
# are there already. Needs crates.io; on failure prints why and exits 0, and
# the bench then has no sandlock column (its report says so).
#
# usage: tools/install-sandlock.sh DIR
set -uo pipefail
dir=${1:?usage: $0 DIR}
if [[ -x $dir/bin/sandlock-oci ]]; then
    exit 0
fi
echo "install-sandlock: cargo install sandlock-cli sandlock-oci 0.9.0 into $dir (a few minutes, once)" >&2
if ! cargo install --locked --version 0.9.0 --root "$dir" sandlock-cli sandlock-oci >"$dir.log" 2>&1; then
    echo "install-sandlock: failed (log: $dir.log); the bench runs without sandlock" >&2
    tail -n 5 "$dir.log" >&2 || true
fi
exit 0
