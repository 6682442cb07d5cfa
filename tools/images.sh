#!/usr/bin/env bash
# Builds OCI image layouts (tarballs) of the bundles' root filesystems and,
# with --import, imports them into containerd and Docker: no registry needed.
#
#   tools/images.sh [--import] [OUT_DIR]
#
# OUT_DIR (default target/images) gets cordon-busybox.tar,
# cordon-pause.tar (busybox sleeping: a CRI sandbox_image) and
# cordon-python.tar (from bundles/busybox/rootfs and bundles/python/rootfs;
# `make bundles` builds them), each one uncompressed layer, named
# docker.io/library/cordon-{busybox,pause,python}:latest by the index's
# io.containerd.image.name annotation.
#
# --import: `ctr -n default` and `ctr -n k8s.io image import` into the
# containerd at $CONTAINERD_ADDRESS (default /run/containerd/containerd.sock),
# and `docker import` into the Docker at $DOCKER_HOST (default socket), each
# only if it answers; says which it skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

import=0
if [ "${1:-}" = "--import" ]; then import=1; shift; fi
out=${1:-target/images}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# image NAME ROOTFS CMD_JSON: writes $out/NAME.tar.
image() {
    local name=$1 rootfs=$2 cmd=$3
    if [ ! -d "$rootfs" ]; then
        echo "images: $rootfs is missing: run make bundles" >&2
        exit 1
    fi
    local work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    local blobs=$work/layout/blobs/sha256
    mkdir -p "$blobs"
    blob() { # FILE -> prints sha256:HEX SIZE, moves FILE into blobs
        local hex size
        hex=$(sha256sum "$1" | cut -d' ' -f1)
        size=$(stat -c %s "$1")
        mv "$1" "$blobs/$hex"
        echo "sha256:$hex $size"
    }
    tar --numeric-owner -C "$rootfs" -cf "$work/layer.tar" .
    read -r layer layer_size < <(blob "$work/layer.tar")
    jq -cn --arg layer "$layer" --argjson cmd "$cmd" '{
        architecture: "amd64", os: "linux",
        config: {Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], Cmd: $cmd},
        rootfs: {type: "layers", diff_ids: [$layer]}}' > "$work/config.json"
    read -r config config_size < <(blob "$work/config.json")
    jq -cn --arg config "$config" --argjson csize "$config_size" \
        --arg layer "$layer" --argjson lsize "$layer_size" '{
        schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $config, size: $csize},
        layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $layer, size: $lsize}]}' \
        > "$work/manifest.json"
    read -r manifest manifest_size < <(blob "$work/manifest.json")
    jq -cn --arg m "$manifest" --argjson size "$manifest_size" \
        --arg ref "docker.io/library/$name:latest" '{
        schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
        manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $size,
            platform: {architecture: "amd64", os: "linux"},
            annotations: {"io.containerd.image.name": $ref, "org.opencontainers.image.ref.name": "latest"}}]}' \
        > "$work/layout/index.json"
    echo '{"imageLayoutVersion":"1.0.0"}' > "$work/layout/oci-layout"
    tar -C "$work/layout" -cf "$out/$name.tar.tmp" .
    mv "$out/$name.tar.tmp" "$out/$name.tar"
    echo "images: $out/$name.tar (docker.io/library/$name:latest)"
}

image cordon-busybox bundles/busybox/rootfs '["sh"]'
# A pod sandbox ("pause") image for CRI's sandbox_image: busybox sleeping.
image cordon-pause bundles/busybox/rootfs '["sleep", "2147483647"]'
if [ -d bundles/python/rootfs ]; then
    image cordon-python bundles/python/rootfs '["python3"]'
else
    echo "images: bundles/python/rootfs missing: cordon-python not built" >&2
fi

[ "$import" = 1 ] || exit 0

addr=${CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}
if command -v ctr >/dev/null && ctr --address "$addr" version >/dev/null 2>&1; then
    for ns in default k8s.io; do
        for t in "$out"/cordon-*.tar; do
            ctr --address "$addr" -n "$ns" image import "$t" >/dev/null
            echo "images: imported $(basename "$t" .tar) into containerd ($addr, namespace $ns)"
        done
    done
else
    echo "images: no containerd answers at $addr: skipped (set CONTAINERD_ADDRESS)"
fi

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    # Docker 20.10 loads docker-archive tarballs, not OCI layouts: import
    # the root filesystems instead.
    for b in busybox python; do
        [ -d "bundles/$b/rootfs" ] || continue
        cmd=sh; [ "$b" = python ] && cmd=python3
        tar --numeric-owner -C "bundles/$b/rootfs" -c . |
            docker import -c "CMD [\"$cmd\"]" -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
                - "cordon-$b:latest" >/dev/null
        echo "images: imported cordon-$b:latest into Docker"
    done
else
    echo "images: no Docker daemon answers: skipped (set DOCKER_HOST)"
fi
