#!/usr/bin/env bash
# Soft-RoCE for the verbs tests: Debian 12's own kernel booted in qemu (TCG;
# the host kernel has no RDMA) with rdma_rxe on two ends of a veth pair, so
# RoCE packets really cross a link. Host-built binaries run inside against
# the guest's real libibverbs and rxe provider.
#
#   vm.sh prepare              tools, kernel and rootfs (cached, see below)
#   vm.sh run GUEST_DIR        pack GUEST_DIR (must hold run.sh) with the
#                              rootfs, boot, run it; exit 0 iff it passed
#
# GUEST_DIR/run.sh runs in the guest as root after both rxe devices are up,
# with MCDMA_RXE_DEVS="rxe1 rxe2", MCDMA_RXE_ADDRS="10.0.1.1 10.0.1.2" and
# MCDMA_RXE_GIDS (their RoCE v2 IPv4-mapped GID indexes) in its environment.
# Its exit code is the verdict. Shared libraries that GUEST_DIR's ELF files
# need and the rootfs lacks are copied from this host (both are Debian 12).
#
# The verdict travels through qemu's isa-debug-exit port: the guest writes
# 0x10 (pass: qemu exits 33) or 0x11 (fail: 35). Any other qemu exit
# (a crash, a hang killed by the timeout, a power-off without a verdict) is a
# failure; exit 0 from qemu never counts as a pass.
#
# Cache: $MCDMA_VM_CACHE (default /var/cache/mcdma/verbs-vm), keyed by the
# kernel package version, so a new Debian kernel rebuilds it. Needs root
# (debootstrap, apt). Exit codes: 0 pass, 1 fail, 2 usage, 77 cannot run here.
# $MCDMA_VM_TIMEOUT (seconds, default 900) bounds the boot and run;
# $MCDMA_VM_CPUS (default 2) is the guest's vCPU count.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${MCDMA_VM_CACHE:-/var/cache/mcdma/verbs-vm}
timeout_s=${MCDMA_VM_TIMEOUT:-900}
# vCPUs of the guest (TCG threads; more than the host has CPUs time-slices
# them, which makes polling threads slower, not faster: bench/README.md).
vcpus=${MCDMA_VM_CPUS:-2}
log() { echo "vm.sh: $*" >&2; }

tools() {
  local need=()
  command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v cpio >/dev/null || need+=(cpio)
  [ -x /bin/busybox ] || need+=(busybox-static)
  command -v zstd >/dev/null || need+=(zstd)
  command -v depmod >/dev/null || need+=(kmod)
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need[*]} and not root to install them"
    exit 77
  fi
  log "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'
}

prepare() {
  tools
  local kpkg
  kpkg=$(kernel_pkg)
  [ -n "$kpkg" ] || { log "SKIP: cannot resolve linux-image-amd64 (run apt-get update)"; exit 77; }
  local kdir=$cache/$kpkg
  mkdir -p "$cache"
  if [ ! -e "$kdir/kernel.ok" ]; then
    log "kernel $kpkg"
    rm -rf "$kdir" && mkdir -p "$kdir"
    (cd "$kdir" && apt-get download -qq "$kpkg" 2>/dev/null && dpkg-deb -x linux-image-*.deb kernel &&
      rm -f linux-image-*.deb) || { log "SKIP: cannot download $kpkg from the Debian mirror"; exit 77; }
    depmod -b "$kdir/kernel" "$(ls "$kdir/kernel/lib/modules")"  # the .deb ships no modules.dep
    touch "$kdir/kernel.ok"
  fi
  if [ ! -e "$cache/rootfs.ok" ]; then
    log "debootstrap bookworm rootfs (once)"
    rm -rf "$cache/rootfs"
    debootstrap --variant=minbase \
      --include=ibverbs-providers,ibverbs-utils,rdmacm-utils,perftest,iproute2,kmod,rdma-core \
      bookworm "$cache/rootfs" >/dev/null ||
      { log "SKIP: debootstrap of the guest rootfs failed (Debian mirror unreachable?)"; exit 77; }
    touch "$cache/rootfs.ok"
  fi
  echo "$kdir"
}

# Copies into $2 every shared library the ELF files under $1 need that the
# rootfs does not have.
copy_libs() {
  local src=$1 stage=$2
  find "$src" -type f -perm -u+x -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print |
    while read -r elf; do ldd "$elf" 2>/dev/null | awk '/=> \//{print $3}'; done | sort -u |
    while read -r lib; do
      local name
      name=$(basename "$lib")
      if [ -z "$(find "$stage/usr/lib" "$stage/lib" -name "$name" -print -quit 2>/dev/null)" ]; then
        mkdir -p "$stage/usr/lib/x86_64-linux-gnu"
        cp -L "$lib" "$stage/usr/lib/x86_64-linux-gnu/$name"
      fi
    done
}

run() {
  local guest=${1:?usage: vm.sh run GUEST_DIR}
  [ -x "$guest/run.sh" ] || { log "$guest/run.sh missing or not executable"; exit 2; }
  guest=$(cd "$guest" && pwd)
  local kdir
  kdir=$(prepare) || return $?
  local kv
  kv=$(ls "$kdir/kernel/lib/modules")
  local work
  work=$(mktemp -d /tmp/mcdma-vm.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  local stage=$work/stage
  mkdir -p "$stage"
  tar -C "$cache/rootfs" --exclude=./usr/share/doc --exclude=./usr/share/man \
    --exclude=./usr/share/locale --exclude=./var/cache/apt --exclude=./var/lib/apt/lists \
    -cf - . | tar -C "$stage" -xf -
  for m in rdma_rxe ib_uverbs rdma_ucm crc32_generic veth; do
    modprobe -d "$kdir/kernel" -S "$kv" --show-depends "$m" | awk '$1=="insmod"{print $2}'
  done | sort -u | while read -r f; do
    r=${f#"$kdir/kernel"/}
    mkdir -p "$stage/$(dirname "$r")"
    cp "$f" "$stage/$r"
  done
  cp "$kdir/kernel/lib/modules/$kv"/modules.{order,builtin,builtin.modinfo} "$stage/lib/modules/$kv/"
  depmod -b "$stage" "$kv"
  cp /bin/busybox "$stage/bin/busybox"
  install -m 755 "$here/guest-init" "$stage/init"
  mkdir -p "$stage/opt/host"
  cp -a "$guest/." "$stage/opt/host/"
  copy_libs "$stage/opt/host" "$stage"
  (cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet) | zstd -T0 -3 -q -o "$work/root.cpio.zst"
  log "booting $(basename "$kdir") (TCG; the guest's verdict decides)"
  set +e
  timeout "$timeout_s" qemu-system-x86_64 -accel tcg,thread=multi -m 3G -smp "$vcpus" -nic none \
    -nographic -no-reboot -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
    -kernel "$kdir/kernel/boot/vmlinuz-$kv" -initrd "$work/root.cpio.zst" \
    -append "console=ttyS0 rdinit=/init panic=-1 quiet" < /dev/null
  local rc=$?
  set -e
  case $rc in
    33) log "guest verdict: PASS"; return 0 ;;
    35) log "guest verdict: FAIL"; return 1 ;;
    124) log "qemu timed out after ${timeout_s}s: FAIL"; return 1 ;;
    *) log "qemu exited $rc without a verdict: FAIL"; return 1 ;;
  esac
}

case ${1:-} in
  prepare) prepare >/dev/null ;;
  run)
    shift
    run "$@"
    ;;
  *) echo "usage: vm.sh prepare | run GUEST_DIR" >&2; exit 2 ;;
esac
