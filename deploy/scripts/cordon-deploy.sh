#!/bin/sh
# cordon-deploy.sh install|cleanup: puts cordon on a Kubernetes node, or
# takes it off again (as kata-deploy does). The DaemonSets in deploy/ run it
# from the cordon-deploy image with the node's / mounted at $HOST_ROOT.
#
# install: copies cordon (and containerd-shim-cordon-v2) to
#   $CORDON_INSTALL_DIR on the node, writes the cordon-audit wrapper there
#   (`cordon --policy audit "$@"`), merges the runtimes `cordon` and
#   `cordon-audit` into containerd's config with `cordon install containerd
#   --write` (runc stays the default; the previous file is kept as
#   config.toml.before-cordon), restarts containerd and labels the node
#   $CORDON_NODE_LABEL=true so the RuntimeClasses schedule pods there.
# cleanup: takes the label off, `cordon uninstall containerd --write` for
#   both runtimes (the file comes back as it was), restarts containerd and
#   removes the binaries.
#
# Environment (defaults for the DaemonSets):
#   HOST_ROOT           the node's / inside this container (/host; "" when
#                       run on the node itself)
#   CORDON_INSTALL_DIR  where the binaries go, as the node sees it
#                       (/opt/cordon/bin)
#   CORDON_ARTIFACTS    where this image keeps them (/opt/cordon-artifacts)
#   CONTAINERD_CONFIG   containerd's config, as the node sees it
#                       (/etc/containerd/config.toml)
#   CORDON_STATE_ROOT   options.Root of cordon's runtimes
#                       (/run/containerd/cordon)
#   CORDON_RESTART_CMD  how to restart containerd (nsenter into the node's
#                       namespaces: systemctl restart containerd)
#   NODE_NAME           this node (from the pod's spec.nodeName); labelling
#                       is skipped without it
#   CORDON_NODE_LABEL   the label key (org.cordon/runtime)
set -eu

HOST_ROOT=${HOST_ROOT-/host}
CORDON_INSTALL_DIR=${CORDON_INSTALL_DIR:-/opt/cordon/bin}
CORDON_ARTIFACTS=${CORDON_ARTIFACTS:-/opt/cordon-artifacts}
CONTAINERD_CONFIG=${CONTAINERD_CONFIG:-/etc/containerd/config.toml}
CORDON_STATE_ROOT=${CORDON_STATE_ROOT:-/run/containerd/cordon}
CORDON_RESTART_CMD=${CORDON_RESTART_CMD:-nsenter --target 1 --mount --uts --ipc --net --pid -- systemctl restart containerd}
CORDON_NODE_LABEL=${CORDON_NODE_LABEL:-org.cordon/runtime}
NODE_NAME=${NODE_NAME:-}

say() { echo "cordon-deploy: $*"; }
die() { echo "cordon-deploy: $*" >&2; exit 1; }

dest="$HOST_ROOT$CORDON_INSTALL_DIR"
config="$HOST_ROOT$CONTAINERD_CONFIG"
cordon="$CORDON_ARTIFACTS/cordon"

# label VALUE: sets (true) or removes (null) the node label through the API
# server, with the pod's service account.
label() {
    if [ -z "$NODE_NAME" ]; then
        say "NODE_NAME is not set: not labelling the node"
        return 0
    fi
    sa=/var/run/secrets/kubernetes.io/serviceaccount
    value=$1
    [ "$value" = null ] || value="\"$value\""
    body="{\"metadata\":{\"labels\":{\"$CORDON_NODE_LABEL\":$value}}}"
    curl -fsS --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" \
        -H "Content-Type: application/merge-patch+json" -X PATCH --data "$body" \
        "https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}/api/v1/nodes/$NODE_NAME" >/dev/null \
        || die "label node $NODE_NAME ($CORDON_NODE_LABEL=$1) failed"
    say "node $NODE_NAME: $CORDON_NODE_LABEL=$1"
}

# sum_of FILE: its checksum ("none" when it does not exist).
sum_of() { cksum "$1" 2>/dev/null || echo none; }

restart_containerd() {
    say "restarting containerd: $CORDON_RESTART_CMD"
    sh -c "$CORDON_RESTART_CMD" || die "restart containerd failed ($CORDON_RESTART_CMD)"
}

install_cordon() {
    [ -x "$cordon" ] || die "$cordon: missing from the image"
    mkdir -p "$dest"
    for bin in cordon containerd-shim-cordon-v2; do
        if [ -e "$CORDON_ARTIFACTS/$bin" ]; then
            # A new file renamed over the old: a running container's binary
            # is never written to.
            cp "$CORDON_ARTIFACTS/$bin" "$dest/.$bin.new"
            chmod 0755 "$dest/.$bin.new"
            mv -f "$dest/.$bin.new" "$dest/$bin"
        fi
    done
    printf '#!/bin/sh\n# cordon with the audit policy for every container (RuntimeClass cordon-audit).\nexec %s/cordon --policy audit "$@"\n' \
        "$CORDON_INSTALL_DIR" >"$dest/.cordon-audit.new"
    chmod 0755 "$dest/.cordon-audit.new"
    mv -f "$dest/.cordon-audit.new" "$dest/cordon-audit"
    say "installed cordon in $dest"
    before=$(sum_of "$config")
    for rt in cordon cordon-audit; do
        "$cordon" install containerd --write --config "$config" --runtime "$rt" \
            --binary "$CORDON_INSTALL_DIR/$rt" --state-root "$CORDON_STATE_ROOT"
    done
    # Installing again (a restarted pod) changes nothing: no restart then.
    [ "$(sum_of "$config")" = "$before" ] || restart_containerd
    label true
}

cleanup_cordon() {
    label null
    before=$(sum_of "$config")
    for rt in cordon-audit cordon; do
        "$cordon" uninstall containerd --write --config "$config" --runtime "$rt"
    done
    [ "$(sum_of "$config")" = "$before" ] || restart_containerd
    rm -f "$dest/cordon" "$dest/containerd-shim-cordon-v2" "$dest/cordon-audit"
    rmdir "$dest" 2>/dev/null || true
    say "removed cordon from $dest"
}

case "${1:-}" in
    install) install_cordon ;;
    cleanup) cleanup_cordon ;;
    *) die "usage: cordon-deploy.sh install|cleanup" ;;
esac
