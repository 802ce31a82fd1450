#!/usr/bin/env bash
# Builds the local root images isx's templates and tests start from, since
# nothing can be pulled from an image server here:
#   isx/busybox    a busybox-static rootfs (no init system; fast tests)
#   isx/debian-12  Debian bookworm minbase with systemd, git, sudo and bash
# Tarballs are cached in $ISX_IMAGE_CACHE (default /var/cache/isx/images) and
# an image already known to Incus under its alias is left alone.
set -euo pipefail

cache=${ISX_IMAGE_CACHE:-/var/cache/isx/images}
mirror=${ISX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"

have_alias() { incus image alias list --format csv 2>/dev/null | cut -d, -f1 | grep -qx "$1"; }

metadata() { # $1=dir $2=description
  cat >"$1/metadata.yaml" <<META
architecture: x86_64
creation_date: $(date +%s)
properties:
  description: "$2"
  os: linux
META
}

build_busybox() {
  local tarball=$cache/busybox.tar.gz
  if [ ! -s "$tarball" ]; then
    local work; work=$(mktemp -d)
    mkdir -p "$work/rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,proc,sys,dev,run,var/tmp,home}
    cp /bin/busybox "$work/rootfs/bin/busybox"
    for applet in $(/bin/busybox --list); do
      [ "$applet" = busybox ] || ln -sf /bin/busybox "$work/rootfs/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$work/rootfs/etc/passwd"
    printf 'root:x:0:\n' >"$work/rootfs/etc/group"
    printf 'root::19000:0:99999:7:::\n' >"$work/rootfs/etc/shadow"
    chmod 1777 "$work/rootfs/tmp" "$work/rootfs/var/tmp"
    # A container needs a long-running PID 1; busybox init reads /etc/inittab.
    printf '::sysinit:/bin/mount -t tmpfs tmpfs /run\n::respawn:/bin/sleep 2147483647\n' >"$work/rootfs/etc/inittab"
    ln -sf /bin/busybox "$work/rootfs/sbin/init"
    metadata "$work" "isx busybox test image"
    tar -C "$work" -czf "$tarball.tmp" metadata.yaml rootfs
    mv "$tarball.tmp" "$tarball"
    rm -rf "$work"
  fi
  have_alias isx/busybox || incus image import "$tarball" --alias isx/busybox >/dev/null
}

build_debian() {
  local tarball=$cache/debian-12.tar.gz
  if [ ! -s "$tarball" ]; then
    local work; work=$(mktemp -d)
    debootstrap --variant=minbase \
      --include=systemd,systemd-sysv,git,sudo,bash,ca-certificates,dbus,procps \
      bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
        tail -30 "$work/debootstrap.log" >&2; exit 1; }
    chroot "$work/rootfs" apt-get clean
    echo "isx" >"$work/rootfs/etc/hostname"
    # sudo looks the host name up; without this it warns on every call.
    printf '127.0.0.1 localhost\n127.0.1.1 isx\n::1 localhost ip6-localhost ip6-loopback\n' >"$work/rootfs/etc/hosts"
    metadata "$work" "isx Debian 12 minbase"
    tar -C "$work" --numeric-owner -czf "$tarball.tmp" metadata.yaml rootfs
    mv "$tarball.tmp" "$tarball"
    rm -rf "$work"
  fi
  have_alias isx/debian-12 || incus image import "$tarball" --alias isx/debian-12 >/dev/null
}

case "${1:-all}" in
  busybox) build_busybox ;;
  debian) build_debian ;;
  all) build_busybox; build_debian ;;
  *) echo "usage: images.sh [busybox|debian|all]" >&2; exit 2 ;;
esac
