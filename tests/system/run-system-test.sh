#!/usr/bin/env bash
# The Debian packages on a clean Debian 12 root, and the service under real
# systemd (ctest System.Packages, label system):
#
#   run-system-test.sh BUILD
#
# 1. scripts/build-debs.sh BUILD makes the four packages.
# 2. A copy of the verbs VM's Debian 12 rootfs (tests/verbs/vm.sh: a
#    debootstrap --variant=minbase root) becomes a chroot; apt installs
#    systemd and the packages, with their dependencies from the Debian
#    mirror. Checked there: each package installed, user and group mcdma,
#    /etc/mcdma root:mcdma 0750, the unit installed but not enabled, the
#    programs, `import mcdma`, libmcdma.so.1 known to ldconfig.
# 3. The chroot gets users alice (group mcdma) and bob, a fabric key, the
#    unit enabled, and guest/ with mcdma-system-check.service; it boots in
#    qemu (TCG) with systemd as PID 1, which starts mcdma-rpcd, and then
#    guest/check.sh runs the checks (READY=1, group access and a named
#    permission error, doctor, the watchdog on SIGSTOP, stop draining a call
#    in flight and exiting 0, no secret in the journal); its verdict reaches
#    qemu through isa-debug-exit.
# 4. Back in the chroot: removing the packages leaves no unit enabled;
#    purging removes the config.
# Exit codes: 0 pass, 1 fail, 77 cannot run here (not root, no mirror).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run-system-test.sh BUILD}" && pwd)
cache=${MCDMA_VM_CACHE:-/var/cache/mcdma/verbs-vm}
timeout_s=${MCDMA_VM_TIMEOUT:-600}
log() { echo "system: [$(date +%T)] $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
[ "$(id -u)" = 0 ] || { log "SKIP: needs root (chroot, qemu)"; exit 77; }

log "building the packages"
"$src/scripts/build-debs.sh" "$build" >&2
mapfile -t debs < <(ls "$build"/debs/*.deb)
[ ${#debs[@]} -eq 4 ] || fail "expected 4 packages, got ${#debs[@]}: ${debs[*]}"

"$src/tests/verbs/vm.sh" prepare || exit $?
kdir=$(ls -d "$cache"/linux-image-*/ | sort | tail -1)
kv=$(ls "$kdir/kernel/lib/modules")

work=$(mktemp -d /var/tmp/mcdma-system.XXXXXX)
root=$work/root
mounted=()
unmount_all() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  mounted=()
}
cleanup() { unmount_all; rm -rf "$work"; }
trap cleanup EXIT
mount_chroot() {
  for d in proc sys dev dev/pts; do
    case $d in
      proc) mount -t proc proc "$root/proc" ;;
      sys) mount -t sysfs sys "$root/sys" ;;
      dev) mount --bind /dev "$root/dev" ;;
      dev/pts) mount -t devpts devpts "$root/dev/pts" ;;
    esac
    mounted+=("$root/$d")
  done
}
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }

log "chroot: a copy of the Debian 12 minbase rootfs"
mkdir -p "$root"
tar -C "$cache/rootfs" -cf - . | tar -C "$root" -xf -
mount_chroot
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/tmp/debs"
cp "${debs[@]}" "$root/tmp/debs/"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

log "chroot: apt-get install systemd and the packages"
in_root apt-get update -qq >&2 || { log "SKIP: apt-get update failed in the chroot (mirror unreachable?)"; exit 77; }
in_root apt-get install -y -qq --no-install-recommends systemd systemd-sysv procps util-linux \
  >"$work/apt-systemd.log" 2>&1 || { tail -20 "$work/apt-systemd.log" >&2; fail "apt-get install systemd"; }
in_root sh -c 'apt-get install -y --no-install-recommends /tmp/debs/*.deb' >"$work/apt-debs.log" 2>&1 ||
  { tail -30 "$work/apt-debs.log" >&2; fail "apt-get install of the packages"; }
grep -E '^(Setting up|Unpacking) (mcdma-rpcd|libmcdma|python3-mcdma)' "$work/apt-debs.log" >&2 || true

log "chroot: what the packages installed"
for p in mcdma-rpcd libmcdma1 libmcdma-dev python3-mcdma; do
  [ "$(in_root dpkg-query -W -f='${Status}' "$p")" = "install ok installed" ] || fail "$p is not installed"
done
in_root getent passwd mcdma >/dev/null || fail "no user mcdma"
in_root getent group mcdma >/dev/null || fail "no group mcdma"
[ "$(in_root stat -c '%U:%G %a' /etc/mcdma)" = "root:mcdma 750" ] ||
  fail "/etc/mcdma is $(in_root stat -c '%U:%G %a' /etc/mcdma)"
[ -f "$root/usr/lib/systemd/system/mcdma-rpcd.service" ] || fail "no unit in /usr/lib/systemd/system"
grep -q '^ExecStart=/usr/bin/mcdma-rpcd --config /etc/mcdma/rpcd.toml$' \
  "$root/usr/lib/systemd/system/mcdma-rpcd.service" || fail "the unit's ExecStart is not /usr/bin, /etc/mcdma"
enabled=$(in_root systemctl is-enabled mcdma-rpcd.service || true)
[ "$enabled" = disabled ] || fail "the unit is '$enabled' after install (expected disabled)"
in_root mcdma-rpcd --version >&2 || fail "mcdma-rpcd --version"
in_root mcdmactl --version >&2 || fail "mcdmactl --version"
in_root mcdma-rpcd --check --config /etc/mcdma/rpcd.toml >&2 || fail "mcdma-rpcd --check of the installed config"
in_root sh -c 'cd / && python3 -c "import mcdma; print(\"import mcdma:\", mcdma.__version__, mcdma.__file__)"' >&2 ||
  fail "import mcdma"
# Not `ldconfig -p | grep -q`: under pipefail, grep leaving at its first
# match can kill ldconfig with SIGPIPE and fail a library that is there.
ldcache=$(in_root ldconfig -p) || fail "ldconfig -p"
grep -F 'libmcdma.so.1 ' <<<"$ldcache" >/dev/null || fail "ldconfig does not know libmcdma.so.1"
[ -f "$root/usr/lib/cmake/mcdma/mcdmaConfig.cmake" ] || [ -n "$(find "$root/usr/lib" -path '*cmake/mcdma/mcdmaConfig.cmake')" ] ||
  fail "no CMake package"
log "chroot: packages installed and checked"

log "chroot: users, fabric key, the unit enabled, the checks"
in_root useradd -m -G mcdma alice
in_root useradd -m bob
in_root mcdmactl fabric-key new /etc/mcdma/fabric.key >&2
in_root chown mcdma:mcdma /etc/mcdma/fabric.key
sed -i 's|^# fabric_key = .*|fabric_key = "/etc/mcdma/fabric.key"|; s|^listen = .*|listen = "127.0.0.1:7471"|' \
  "$root/etc/mcdma/rpcd.toml"
grep -q '^fabric_key = "/etc/mcdma/fabric.key"' "$root/etc/mcdma/rpcd.toml" || fail "cannot set fabric_key"
in_root systemctl enable mcdma-rpcd.service >&2
mkdir -p "$root/opt/mcdma-system"
cp "$here/guest/check.sh" "$here/guest/calls.py" "$root/opt/mcdma-system/"
cp "$here/guest/mcdma-system-check.service" "$root/etc/systemd/system/"
in_root systemctl enable mcdma-system-check.service >&2
# agetty on the serial console would hang up the checks' output.
in_root systemctl mask serial-getty@ttyS0.service getty.target >&2
rm -f "$root/usr/sbin/policy-rc.d"
: >"$root/etc/machine-id"
echo mcdma-system >"$root/etc/hostname"
unmount_all

log "packing the VM's root"
(cd "$root" && find . -xdev -path ./tmp/debs -prune -o -print0 | cpio --null -o -H newc --quiet) |
  zstd -T0 -3 -q -o "$work/root.cpio.zst"
log "booting with systemd as PID 1 (TCG; the guest's checks decide)"
set +e
timeout "$timeout_s" qemu-system-x86_64 -accel tcg,thread=multi -m 4G -smp 2 -nic none \
  -nographic -no-reboot -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
  -kernel "$kdir/kernel/boot/vmlinuz-$kv" -initrd "$work/root.cpio.zst" \
  -append "console=ttyS0 rdinit=/lib/systemd/systemd panic=-1 quiet systemd.show_status=0" </dev/null |
  tr -d '\r' | grep --line-buffered -E '^guest:|mcdma|Watchdog|Failed|error' >&2
rc=${PIPESTATUS[0]}
set -e
case $rc in
  33) log "guest verdict: PASS" ;;
  35) fail "guest verdict: FAIL" ;;
  124) fail "qemu timed out after ${timeout_s}s" ;;
  *) fail "qemu exited $rc without a verdict" ;;
esac

log "chroot: removing the packages"
mount_chroot
in_root apt-get remove -y mcdma-rpcd python3-mcdma libmcdma-dev libmcdma1 >"$work/apt-remove.log" 2>&1 ||
  { tail -20 "$work/apt-remove.log" >&2; fail "apt-get remove"; }
left=$(find "$root/etc/systemd/system" -name 'mcdma-rpcd*' 2>/dev/null)
[ -z "$left" ] || fail "enabled unit links left after removal: $left"
[ ! -e "$root/usr/lib/systemd/system/mcdma-rpcd.service" ] || fail "the unit file is left after removal"
[ "$(in_root dpkg-query -W -f='${Status}' mcdma-rpcd)" = "deinstall ok config-files" ] ||
  fail "mcdma-rpcd is '$(in_root dpkg-query -W -f='${Status}' mcdma-rpcd)' after remove"
[ -f "$root/etc/mcdma/rpcd.toml" ] || fail "remove (not purge) deleted rpcd.toml"
in_root apt-get purge -y mcdma-rpcd >"$work/apt-purge.log" 2>&1 || { tail -20 "$work/apt-purge.log" >&2; fail "apt-get purge"; }
[ ! -e "$root/etc/mcdma/rpcd.toml" ] && [ ! -e "$root/etc/mcdma/rpcd.toml.example" ] ||
  fail "purge left the config files"
log "removal leaves no unit enabled; purge removed the config (the admin's fabric key stays: $(ls "$root/etc/mcdma" 2>/dev/null | tr '\n' ' '))"
log "PASS"
