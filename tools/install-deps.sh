#!/usr/bin/env bash
# Installs the Debian packages cordon's build, bundles, demo and tests need
# (Debian 12, as root). Safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
  libseccomp-dev pkg-config gcc libc6-dev make jq procps iproute2 \
  busybox-static debootstrap runc crun containerd docker.io podman >/dev/null
