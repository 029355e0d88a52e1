#!/bin/sh
# The band VM's configuration, applied once per image build as an mmdebstrap customize hook.
#   $1            the new root file system
#   BAND_RECIPE   this folder (files/ holds the config files)
#   BAND_KEYS     a folder with ssh_host_ed25519_key{,.pub} and authorized_keys, made by `band setup`
set -eu
root="$1"
files="$BAND_RECIPE/files"
keys="$BAND_KEYS"

put() { install -D -m "$1" -o 0 -g 0 "$2" "$root$3"; }

put 0644 "$files/sshd_config" /etc/ssh/sshd_config.d/band.conf
put 0644 "$files/network" /etc/systemd/network/10-band.network
rm -f "$root/etc/resolv.conf"
put 0644 "$files/resolv.conf" /etc/resolv.conf
put 0644 "$files/fstab" /etc/fstab
put 0644 "$files/hostname" /etc/hostname
put 0644 "$files/server.toml" /etc/band/server.toml
put 0644 "$files/journald.conf" /etc/systemd/journald.conf.d/band.conf
put 0644 "$files/initramfs-modules" /etc/initramfs-tools/modules
put 0644 "$files/initramfs.conf" /etc/initramfs-tools/conf.d/band.conf

# The host key is made by `band setup` and pinned on the host; no other host key exists.
rm -f "$root"/etc/ssh/ssh_host_*
put 0600 "$keys/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
put 0644 "$keys/ssh_host_ed25519_key.pub" /etc/ssh/ssh_host_ed25519_key.pub
put 0600 "$keys/authorized_keys" /etc/band/authorized_keys

chroot "$root" systemctl enable systemd-networkd.service ssh.service
chroot "$root" systemctl set-default multi-user.target
# Nothing waits for "network online"; no consoles to log in on (root has no password anyway);
# no periodic jobs in a VM that only runs sandboxes.
chroot "$root" systemctl mask systemd-networkd-wait-online.service getty.target \
  e2scrub_reap.service e2scrub_all.timer fstrim.timer apt-daily.timer apt-daily-upgrade.timer \
  dpkg-db-backup.timer systemd-binfmt.service
# Boot to ready as short as the kernel allows: under TCG the guest runs on one host thread, so
# every unit started delays SSH. (kmod-static-nodes stays: it makes /dev/net/tun, which the
# network layer's slirp4netns opens.) Nothing here is used: no device mapper, loop, FUSE, pstore or
# EFI modules to preload, no debug/tracing/config/hugepage file systems, no network config on the
# kernel command line, no utmp (no logins), no temp-file cleaning in a VM that only runs
# sandboxes, no remote file systems; the users are made at build time (sysusers), and the
# journal stays in memory (no flush).
chroot "$root" systemctl mask modprobe@dm_mod.service modprobe@loop.service \
  modprobe@fuse.service modprobe@efi_pstore.service modprobe@configfs.service \
  modprobe@drm.service \
  sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount \
  sys-fs-fuse-connections.mount dev-hugepages.mount \
  systemd-network-generator.service systemd-pstore.service systemd-sysusers.service \
  systemd-update-utmp.service systemd-update-utmp-runlevel.service \
  systemd-journal-flush.service systemd-tmpfiles-clean.timer remote-fs.target
chroot "$root" update-initramfs -u -k all

# The run identities band-server leases (uidpool.rs creates missing ones the same way).
i=0
while [ "$i" -lt 64 ]; do
  chroot "$root" useradd --system --no-create-home --user-group --shell /usr/sbin/nologin "band-run-$i"
  i=$((i + 1))
done

# band-server's binaries are uploaded by `band setup` (version handshake), not baked in.
install -d -m 0755 -o 0 -g 0 "$root/usr/local/lib/band"

# No package caches in the image.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
