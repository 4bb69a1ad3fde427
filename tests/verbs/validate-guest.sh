#!/bin/bash
# The validation run inside the Soft-RoCE VM (vm.sh; guest-init puts rxe1
# on veth0 = 10.0.1.1 and rxe2 on veth1 = 10.0.1.2): two daemons, host-a on
# rxe1 and host-b on rxe2, linked over verbs; `mcdmactl validate --serve`
# on host-b and `mcdmactl validate host-b` on host-a, as a person with two
# real hosts runs them (README, "Validating real hardware"), with small
# counts. Passes when validate exits 0 and wrote report.txt, report.json
# and samples.csv, and the report holds perftest's rows beside the
# daemons'. The report is printed (it is the run's record).
#   validate-guest.sh DIR   (DIR holds mcdma-rpcd and mcdmactl)
# Exit: 0 pass, 1 fail (each reason printed as "FAIL ...").
set -u
dir=${1:?usage: validate-guest.sh DIR}
ctl=$dir/mcdmactl
rpcd=$dir/mcdma-rpcd
tmp=$(mktemp -d /tmp/mcdma-validate.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL validate: $*"
  for f in "$tmp"/*.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }
  done
  exit 1
}

"$ctl" fabric-key new "$tmp/key" > /dev/null || fail "fabric-key new"
for side in a b; do
  if [ $side = a ]; then dev=rxe1 ifc=veth0 ip=10.0.1.1; else dev=rxe2 ifc=veth1 ip=10.0.1.2; fi
  cat > "$tmp/$side.toml" <<TOML
socket = "$tmp/$side.sock"

[verbs]
device = "$dev"
interface = "$ifc"
TOML
  args=(--config "$tmp/$side.toml" --host-id "host-$side" --listen "$ip:7471"
    --data-listen "$ip:7472" --fabric-key "$tmp/key" --log-level warn)
  [ $side = a ] && args+=(--peer "host-b=10.0.1.2:7471,verbs")
  "$rpcd" "${args[@]}" > "$tmp/daemon-$side.log" 2>&1 &
  pids+=($!)
done
up=0
for _ in $(seq 1 120); do
  if "$ctl" --socket "$tmp/a.sock" links --json 2> /dev/null |
    grep -q '"state":"up","transport_requested":"verbs","transport":"verbs"'; then
    up=1
    break
  fi
  sleep 0.5
done
[ $up = 1 ] || fail "the verbs link host-a -> host-b did not come up in 60 s"

"$ctl" --socket "$tmp/b.sock" validate --serve --serve-seconds 1200 > "$tmp/serve.log" 2>&1 &
pids+=($!)
ready=0
for _ in $(seq 1 60); do
  grep -q "mcdma validate responder on host-b" "$tmp/serve.log" && { ready=1; break; }
  sleep 0.5
done
[ $ready = 1 ] || fail "the responder on host-b did not say it was ready"

rc=0
"$ctl" --socket "$tmp/a.sock" --timeout 60000 validate host-b --config "$tmp/a.toml" \
  --samples 200 --warmup 20 --bw-total 16M --perftest-limit 90 --out "$tmp/out" \
  > "$tmp/validate.log" 2>&1 || rc=$?
cat "$tmp/validate.log"
[ "$rc" = 0 ] || fail "mcdmactl validate exited $rc"
for f in report.txt report.json samples.csv; do
  [ -s "$tmp/out/$f" ] || fail "no $f written"
done
grep -q '"verdict":"PASS"' "$tmp/out/report.json" || fail "report.json does not say PASS"
for t in ib_send_lat ib_write_lat ib_read_lat ib_write_bw ib_read_bw; do
  grep -q "\"test\":\"$t\"" "$tmp/out/report.json" || fail "no $t row in report.json"
done
[ "$(grep -c '^call,link,1024,' "$tmp/out/samples.csv")" = 200 ] ||
  fail "samples.csv does not hold 200 call samples of 1 KiB"
echo "PASS validate: the validation run passed in the VM and wrote its report"
