#!/bin/sh
# Build band-sandboxd's container image (OCI layout) from Debian packages, offline from any
# container registry: mmdebstrap makes the root file system from a Debian mirror, umoci writes the
# OCI image. Reproducible: every timestamp is SOURCE_DATE_EPOCH (default: the last commit's
# time), and with MIRROR set to a snapshot.debian.org date the package set is fixed too.
#
#   deploy/image/build.sh [OUT_DIR]          OUT_DIR: default target/image
#
# Environment:
#   BIN_DIR            band-server, band-jail, band-shim, band-sandboxd (default target/release;
#                      build them with `cargo build --release -p band-server`)
#   SUITE              Debian suite (default bookworm)
#   MIRROR             Debian mirror (default http://deb.debian.org/debian; for a fixed package
#                      set: http://snapshot.debian.org/archive/debian/20261101T000000Z)
#   TAG                image tag (default the workspace version)
#   SOURCE_DATE_EPOCH  all timestamps (default: git log -1 --format=%ct)
#
# Result: OUT_DIR/oci (OCI layout, tag TAG) and OUT_DIR/band-sandboxd.tar (oci-archive), which
# `podman load -i` or `skopeo copy oci-archive:… docker://…` take. Needs root (mmdebstrap's root
# mode), mmdebstrap and umoci (both in Debian).
set -eu

here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$here/target/image}
bin=${BIN_DIR:-$here/target/release}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
tag=${TAG:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -n 1)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct)}
export SOURCE_DATE_EPOCH

for p in band-server band-jail band-shim band-sandboxd; do
  [ -x "$bin/$p" ] || { echo "build.sh: $bin/$p is missing (cargo build --release -p band-server)" >&2; exit 2; }
done
for t in mmdebstrap umoci; do
  command -v "$t" >/dev/null || { echo "build.sh: $t is missing (apt-get install $t)" >&2; exit 2; }
done

# What band-server runs: bubblewrap (each run's namespaces), nftables (libnftables1: each run's
# table), slirp4netns (a networked run's relay), passwd (useradd: the run users), iproute2, and
# the programs a pod's band may allow (python3, coreutils are essential).
# The pool's 64 run users (band-run-0 … band-run-63) are made here, not on a run's first use: the
# pod's root file system is read-only (/etc/passwd cannot change there). useradd stamps
# /etc/shadow's dates from SOURCE_DATE_EPOCH, so they are reproducible too.
packages=bubblewrap,nftables,libnftables1,slirp4netns,passwd,iproute2,ca-certificates,python3

rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mmdebstrap --variant=minbase --mode=root --format=tar \
  --include="$packages" \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='mkdir -p "$1/usr/libexec/band" "$1/etc/band" "$1/workspace" "$1/run/band"' \
  --customize-hook="copy-in $bin/band-server $bin/band-jail $bin/band-shim $bin/band-sandboxd /usr/libexec/band" \
  --customize-hook='chmod 0755 "$1"/usr/libexec/band/*' \
  --customize-hook='for n in $(seq 0 63); do chroot "$1" useradd --system --no-create-home --user-group --shell /usr/sbin/nologin "band-run-$n"; done' \
  --customize-hook='rm -f "$1"/etc/passwd- "$1"/etc/group- "$1"/etc/shadow- "$1"/etc/gshadow-' \
  --customize-hook='rm -f "$1"/etc/machine-id "$1"/var/cache/ldconfig/aux-cache' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
  "$suite" "$work/rootfs.tar" "$mirror"

layout="$out/oci"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci unpack --image "$layout:$tag" "$work/bundle"
tar -C "$work/bundle/rootfs" -xpf "$work/rootfs.tar" --numeric-owner
# Every file's time is the epoch, so the layer's bytes depend only on the inputs.
find "$work/bundle/rootfs" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
umoci repack --image "$layout:$tag" --history.created "$created" \
  --history.created_by "deploy/image/build.sh" "$work/bundle"
umoci config --image "$layout:$tag" --created "$created" \
  --history.created "$created" --history.created_by "deploy/image/build.sh (config)" \
  --config.entrypoint /usr/libexec/band/band-sandboxd \
  --config.cmd --band --config.cmd /etc/band/pod/BAND.md \
  --config.cmd --token-file --config.cmd /etc/band/token/token \
  --config.cmd --workspace --config.cmd /workspace \
  --config.cmd --grpc --config.cmd 0.0.0.0:9090 \
  --config.cmd --http --config.cmd 0.0.0.0:8080 \
  --config.exposedports 8080/tcp --config.exposedports 9090/tcp \
  --config.workingdir / \
  --config.user 0:0 \
  --config.label org.opencontainers.image.title=band-sandboxd \
  --config.label "org.opencontainers.image.version=$tag"
umoci gc --layout "$layout"
tar -C "$layout" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  -cf "$out/band-sandboxd.tar" .
echo "build.sh: $layout:$tag and $out/band-sandboxd.tar ($(sha256sum "$out/band-sandboxd.tar" | cut -c1-16))"
