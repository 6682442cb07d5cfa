#!/usr/bin/env bash
# Installs the Debian packages cordon's build, bundles, demo and tests need
# (Debian 12, as root). Safe to run again. protobuf-compiler: the CRI test
# client (k8s-cri) compiles the CRI protos; nodejs: the views suite runs
# the host's node in a container (os.totalmem() under a memory limit);
# python3, git, openssl: the workloads suite's HTTPS server, its git
# repository and its CA.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
  libseccomp-dev pkg-config gcc libc6-dev make jq procps iproute2 \
  busybox-static debootstrap runc crun containerd docker.io podman \
  protobuf-compiler nodejs python3 git openssl >/dev/null
# cargo-fuzz, for `make fuzz` and `make fuzz-smoke` (tools/fuzz.sh).
if ! command -v cargo-fuzz >/dev/null; then
  cargo install --locked cargo-fuzz
fi
