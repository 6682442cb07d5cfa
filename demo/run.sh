#!/usr/bin/env bash
# make demo: runs demo/agent.py in the python bundle under cordon's default
# policy, then prints the supervisor's audit trail for that container.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cordon=${CORDON:-$repo/target/debug/cordon}
root=$(mktemp -d /tmp/cordon-demo-root.XXXXXX)
bundle=$(mktemp -d /tmp/cordon-demo-bundle.XXXXXX)
id=demo-$$
cleanup() { "$cordon" --root "$root" delete --force "$id" >/dev/null 2>&1 || true; rm -rf "$root" "$bundle"; }
trap cleanup EXIT
jq --arg rootfs "$repo/bundles/python/rootfs" --arg demo "$repo/demo" '
  .root.path = $rootfs
  | .process.args = ["python3", "-u", "/demo/agent.py"]
  | .mounts += [{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=64m"]},
                {"destination": "/demo", "type": "bind", "source": $demo, "options": ["rbind", "ro"]}]
' "$repo/bundles/python/config.json" > "$bundle/config.json"
echo "== cordon run: python3 /demo/agent.py under the default policy"
"$cordon" --root "$root" run --keep -b "$bundle" "$id"
echo
echo "== cordon state $id: where the path rules are enforced"
"$cordon" --root "$root" state "$id" | jq -r '.annotations["org.cordon.enforcement"]'
echo "   (kernel: the container's mounts mask /proc/kallsyms and make /proc/sys and /sys read-only,"
echo "    so file access runs at native speed; 'cordon policy show --explain default' says why, per rule)"
echo
echo "== cordon audit $id: what the supervisor decided (denials and emulations)"
"$cordon" --root "$root" audit "$id" | grep -E ' \((deny|emulate)( by .*)?\)$' || true
echo
echo "== cordon audit --stats $id"
"$cordon" --root "$root" audit --stats "$id"
echo
echo "(unshare(CLONE_NEWUSER) and bpf were refused by the BPF filter in the kernel itself:"
echo " no round trip to the supervisor, so they leave no audit record; see 'cordon syscalls';"
echo " 'cordon --trace run ...' sends them to the supervisor too and records each with its rule)"
