#!/usr/bin/env bash
# `mcdmactl doctor --json` end to end: the real binary on this host against a
# real mcdma-rpcd (temporary socket, fabric key made by `mcdmactl fabric-key
# new`). Asserts what a host without RDMA must report (exit 1, rdma_device
# fail "no RDMA device", fabric_key/daemon/clock ok), that a group-readable
# key fails naming `chmod 600 FILE` (the running daemon is not restarted:
# doctor reads the key file itself), and that with a recorded Soft-RoCE dump
# (MCDMA_DOCTOR_DEVICE_DUMP) and verbs.interface = veth0 the device checks
# pass.
#   doctor_host_test.sh BUILD_DIR [SOURCE_DIR]
# Exit: 0 pass, 1 fail, 77 skipped (a binary or python3 missing).
set -euo pipefail
build=${1:?usage: doctor_host_test.sh BUILD_DIR [SOURCE_DIR]}
src=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
ctl=$build/tools/mcdmactl/mcdmactl
rpcd=$build/daemon/mcdma-rpcd
dump=$src/tests/unit/data/rxe_veth.sysfs
for b in "$ctl" "$rpcd"; do
  [ -x "$b" ] || { echo "SKIP: $b is not built"; exit 77; }
done
command -v python3 >/dev/null || { echo "SKIP: python3 not installed (parses the JSON)"; exit 77; }
[ -r "$dump" ] || { echo "SKIP: no device dump at $dump"; exit 77; }
unset MCDMA_DOCTOR_DEVICE_DUMP

dir=$(mktemp -d /tmp/mcdma-doctor.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  [ -f "$dir/out.json" ] && { echo "--- doctor said:"; cat "$dir/out.json"; }
  [ -f "$dir/rpcd.log" ] && { echo "--- mcdma-rpcd log:"; cat "$dir/rpcd.log"; }
  exit 1
}

sock=$dir/rpcd.sock
key=$dir/fabric.key
"$ctl" fabric-key new "$key" >/dev/null || fail "mcdmactl fabric-key new $key"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$rpcd" --socket "$sock" --host-id doctor-a --fabric-key "$key" --listen "127.0.0.1:$port" \
  > "$dir/rpcd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "mcdma-rpcd did not start"

config=$dir/rpcd.toml
printf 'host_id = "doctor-a"\nsocket = "%s"\nfabric_key = "%s"\nlisten = "127.0.0.1:%s"\n' \
  "$sock" "$key" "$port" > "$config"

# doctor [ENV=VALUE...] -- runs `mcdmactl doctor --json` into out.json; sets rc.
doctor() {
  rc=0
  env "$@" "$ctl" doctor --json --socket "$sock" --config "$config" > "$dir/out.json" || rc=$?
}
# field ID KEY: KEY of the first check with id ID ("missing" if none).
field() {
  python3 - "$dir/out.json" "$1" "$2" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert set(doc) == {"healthy", "checks"}, doc.keys()
hits = [c for c in doc["checks"] if c["id"] == sys.argv[2]]
print(hits[0][sys.argv[3]] if hits else "missing")
PY
}
expect() {  # ID VERDICT
  local v
  v=$(field "$1" verdict) || fail "doctor's output is not the JSON object it should be"
  [ "$v" = "$2" ] || fail "$1 is $v, expected $2 ($(field "$1" summary))"
}
expect_in() {  # ID KEY TEXT
  field "$1" "$2" | grep -qF -- "$3" || fail "$1 $2 does not mention '$3': $(field "$1" "$2")"
}

# 1. This host as it is.
doctor
if compgen -G "/sys/class/infiniband/*" > /dev/null; then
  echo "note: this host has RDMA devices; not checking the no-RDMA verdicts"
else
  [ "$rc" = 1 ] || fail "doctor exited $rc on a host without RDMA, expected 1"
  expect rdma_device fail
  expect_in rdma_device summary "no RDMA device"
  expect_in rdma_device fix "modprobe rdma_rxe"
  expect port_active skip
  expect memlock skip
  echo "ok: no RDMA device reported, exit 1"
fi
expect config ok
expect fabric_key ok
expect_in fabric_key summary "$key loads (fingerprint "
expect daemon ok
expect_in daemon summary "answers on $sock"
expect peers skip
expect clock ok
echo "ok: config, fabric_key, daemon, clock ok"

# 2. A group-readable key: doctor fails it, the running daemon is untouched.
chmod 644 "$key"
doctor
[ "$rc" = 1 ] || fail "doctor exited $rc with a mode-0644 key, expected 1"
expect fabric_key fail
expect_in fabric_key fix "chmod 600 $key"
expect daemon ok
chmod 600 "$key"
echo "ok: mode 0644 key fails with 'chmod 600 $key'"

# 3. The recorded Soft-RoCE devices, verbs.interface = veth0.
printf '[verbs]\ninterface = "veth0"\n' >> "$config"
doctor MCDMA_DOCTOR_DEVICE_DUMP="$dump"
for id in rdma_device port_active gid profile; do expect "$id" ok; done
expect_in rdma_device summary "rxe1"
expect_in gid summary "0000:0000:0000:0000:0000:ffff:0a00:0101 (RoCE v2, veth0)"
healthy=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["healthy"])' "$dir/out.json")
if [ "$(field memlock verdict)" = fail ]; then want=1; else want=0; fi
[ "$rc" = "$want" ] || fail "exit $rc with healthy=$healthy and memlock $(field memlock verdict)"
echo "ok: rxe1 on veth0 from the dump: rdma_device, port_active, gid, profile ok" \
  "(memlock $(field memlock verdict), exit $rc)"

# 4. Text for people: one line per check, a fix under each failure.
"$ctl" doctor --socket "$sock" --config "$config" > "$dir/out.txt" || true
grep -q '^\[ ok \] daemon: ' "$dir/out.txt" || fail "text output: $(cat "$dir/out.txt")"
grep -q '^\[ ok \] clock: ' "$dir/out.txt" || fail "text output: $(cat "$dir/out.txt")"
echo "PASS"
