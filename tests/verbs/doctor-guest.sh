#!/bin/bash
# `mcdmactl doctor` inside the Soft-RoCE VM (vm.sh; guest-init puts rxe1 on
# veth0 = 10.0.1.1 and rxe2 on veth1 = 10.0.1.2). With a config naming rxe1
# and veth0 and no daemon running, the device checks must pass against the
# real devices through libibverbs: rdma_device, port_active, gid (the RoCE
# v2 GID of 10.0.1.1 on veth0) and profile ok; daemon fails (nothing
# listens on the config's socket), so doctor exits 1. The guest has no
# python: the JSON is read with grep, relying on doctor printing each check
# as {"id":...,"verdict":...,"summary":...} in that key order.
#   doctor-guest.sh BUILD_DIR   (or a directory that holds mcdmactl itself)
# Exit: 0 pass, 1 any mismatch (each printed as "FAIL ...").
# shellcheck disable=SC2317  # the check functions run through check()
set -u
dir=${1:?usage: doctor-guest.sh BUILD_DIR}
ctl=$dir/tools/mcdmactl/mcdmactl
[ -x "$ctl" ] || ctl=$dir/mcdmactl
[ -x "$ctl" ] || { echo "FAIL doctor: no mcdmactl under $dir"; exit 1; }
unset MCDMA_DOCTOR_DEVICE_DUMP MCDMA_SOCKET
tmp=$(mktemp -d /tmp/mcdma-doctor.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/rpcd.toml" <<TOML
socket = "$tmp/none.sock"

[verbs]
device = "rxe1"
interface = "veth0"
TOML

rc=0
"$ctl" doctor --json --config "$tmp/rpcd.toml" > "$tmp/out.json" 2> "$tmp/err.log" || rc=$?
fails=0
check() {  # label, command...
  local label=$1
  shift
  if "$@"; then
    echo "PASS doctor: $label"
  else
    echo "FAIL doctor: $label"
    fails=$((fails + 1))
  fi
}
verdict() {  # ID
  grep -o "\"id\":\"$1\",\"verdict\":\"[a-z]*\"" "$tmp/out.json" | head -n 1 |
    sed 's/.*"verdict":"//; s/"$//'
}
summary() {  # ID (up to the first quote: enough for the checks below)
  grep -o "\"id\":\"$1\",\"verdict\":\"[a-z]*\",\"summary\":\"[^\"]*" "$tmp/out.json" |
    head -n 1 | sed 's/.*"summary":"//'
}
is() {  # ID VERDICT
  local got
  got=$(verdict "$1")
  [ "$got" = "$2" ] && return 0
  echo "  $1 is '${got:-missing}', expected $2: $(summary "$1")"
  return 1
}
mentions() {  # ID TEXT
  summary "$1" | grep -qF -- "$2" && return 0
  echo "  $1 summary '$(summary "$1")' does not mention '$2'"
  return 1
}

check "prints one JSON object" grep -q '^{"healthy":false,"checks":\[' "$tmp/out.json"
check "exits 1 (no daemon), got $rc" test "$rc" = 1
device_ok() { is rdma_device ok && mentions rdma_device rxe1; }
port_ok() { is port_active ok && mentions port_active "rxe1 port 1 ACTIVE on veth0"; }
gid_ok() { is gid ok && mentions gid "ffff:0a00:0101 (RoCE v2, veth0)"; }
profile_ok() { is profile ok && mentions profile linux-rc; }
check "rdma_device ok: rxe1" device_ok
check "port_active ok: rxe1 port 1 ACTIVE on veth0" port_ok
check "gid ok: the RoCE v2 GID of 10.0.1.1 on veth0" gid_ok
check "profile ok: linux-rc" profile_ok
check "daemon fail (nothing listens on $tmp/none.sock)" is daemon fail
if [ "$fails" -ne 0 ]; then
  echo "--- mcdmactl doctor said:"
  "$ctl" doctor --config "$tmp/rpcd.toml" 2>&1
  echo "--- stderr of the JSON run:"
  cat "$tmp/err.log"
fi
exit "$fails"
