#!/bin/bash
# The system test's checks, run by mcdma-system-check.service in the VM
# once systemd (PID 1) has started mcdma-rpcd.service from the installed
# Debian package (tests/system/run-system-test.sh prepares the VM). Each
# check prints "check: NAME: ok" or "check: NAME: FAILED ...". The verdict
# goes to qemu through isa-debug-exit: 0x10 pass, 0x11 fail.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
here=/opt/mcdma-system
unit=mcdma-rpcd.service
failed=0
say() { echo "guest: [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
ok() { say "check: $1: ok${2:+ ($2)}"; }
bad() { say "check: $1: FAILED: $2"; failed=1; }
verdict() {
  say "verdict: $1"
  sync
  if [ "$1" = pass ]; then code=10; else code=11; fi
  printf "\\x$code" | dd of=/dev/port bs=1 seek=$((0xf4)) count=1 2>/dev/null
  sleep 5
  systemctl poweroff --force --force
}
prop() { systemctl show -p "$1" --value "$unit"; }
wait_active() {
  for _ in $(seq 120); do
    [ "$(systemctl is-active "$unit")" = active ] && return 0
    sleep 0.5
  done
  return 1
}

say "systemd $(systemctl --version | head -1 | cut -d' ' -f2) is PID 1: $(cat /proc/1/comm)"
[ "$(cat /proc/1/comm)" = systemd ] || bad pid1 "PID 1 is $(cat /proc/1/comm)"

# 1. enabled at boot, active through READY=1 (Type=notify: "active" only
# after the daemon's sd_notify READY=1).
if wait_active; then
  ok active "Type=$(prop Type), NotifyAccess=$(prop NotifyAccess), Watchdog=$(prop WatchdogUSec), MainPID=$(prop MainPID)"
else
  bad active "$(systemctl status --no-pager "$unit" 2>&1 | tail -20)"
  verdict fail
fi
[ "$(prop Type)" = notify ] || bad notify "Type is $(prop Type)"
[ "$(systemctl is-enabled "$unit")" = enabled ] || bad enabled "is-enabled: $(systemctl is-enabled "$unit")"
[ "$(stat -c '%U:%G %a' /run/mcdma)" = "mcdma:mcdma 750" ] ||
  bad runtime_dir "/run/mcdma is $(stat -c '%U:%G %a' /run/mcdma)"
[ "$(ps -o user= -p "$(prop MainPID)")" = mcdma ] || bad user "the daemon runs as $(ps -o user= -p "$(prop MainPID)")"

# 2. a user in group mcdma connects and calls; one outside it gets a named
# permission error (from the library and from mcdmactl).
if out=$(runuser -u alice -- python3 "$here/calls.py" echo 200 2>&1); then ok group_member "$out"
else bad group_member "$out"; fi
if out=$(runuser -u alice -- mcdmactl status 2>&1); then ok group_member_status
else bad group_member_status "$out"; fi
if out=$(runuser -u bob -- python3 "$here/calls.py" denied 2>&1); then ok outsider "$out"
else bad outsider "$out"; fi
out=$(runuser -u bob -- mcdmactl status 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q PERMISSION_DENIED <<<"$out"; then ok outsider_status "exit $rc: $(head -1 <<<"$out")"
else bad outsider_status "exit $rc: $out"; fi

# 3. doctor, as the daemon's user (the fabric key is its own), against the running daemon: every check that this VM
# can pass passes (it has no RDMA device: those checks may fail here).
doctor=$(runuser -u mcdma -- mcdmactl doctor --json 2>&1)
say "doctor: $doctor"
if python3 - "$doctor" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
# What this VM can pass; with no RDMA device the device checks fail
# (rdma_device) or skip (port, GID, profile, memlock, path MTU).
need = {"config", "daemon", "fabric_key", "budgets", "clock"}
seen = {c["id"]: c["verdict"] for c in r["checks"]}
bad = [f"{k}={seen.get(k, 'missing')}" for k in sorted(need) if seen.get(k) not in ("ok", "warn")]
bad += [f"{k}=fail" for k, v in seen.items() if v == "fail" and k != "rdma_device"]
print("doctor:", ", ".join(f"{k}={v}" for k, v in seen.items()))
sys.exit(1 if bad else 0)
PY
then ok doctor; else bad doctor "a check this VM can pass did not"; fi

# 4. the watchdog: a SIGSTOPped daemon stops sending WATCHDOG=1 and systemd
# restarts it (WatchdogSec=10s; SIGABRT, then SIGKILL after TimeoutAbortSec).
pid=$(prop MainPID)
restarts=$(prop NRestarts)
kill -STOP "$pid"
say "watchdog: SIGSTOP to $pid"
new=$pid
for _ in $(seq 120); do
  new=$(prop MainPID)
  if [ "$new" != "$pid" ] && [ "$new" != 0 ] && [ "$(systemctl is-active "$unit")" = active ]; then break; fi
  sleep 0.5
done
if [ "$new" != "$pid" ] && [ "$new" != 0 ] && [ "$(prop NRestarts)" -gt "$restarts" ] &&
   journalctl -u "$unit" -o cat | grep -F 'Watchdog timeout' >/dev/null; then
  ok watchdog "restarted: $pid -> $new, NRestarts $(prop NRestarts)"
else
  bad watchdog "MainPID $pid -> $new, NRestarts $restarts -> $(prop NRestarts)"
fi
wait_active || bad watchdog "not active again after the restart"
runuser -u alice -- python3 "$here/calls.py" echo 20 >/dev/null 2>&1 || bad watchdog "no calls after the restart"

# 5. `systemctl stop` with a call in flight: the daemon drains (the call
# returns its reply) and exits 0.
marker=/tmp/drain.inflight
rm -f "$marker"
runuser -u alice -- python3 "$here/calls.py" drain "$marker" >/tmp/drain.out 2>&1 &
app=$!
for _ in $(seq 100); do [ -e "$marker" ] && break; sleep 0.1; done
[ -e "$marker" ] || bad drain "the slow call never reached its handler"
systemctl stop "$unit"
wait $app; rc=$?
if [ $rc -eq 0 ]; then ok drain "$(cat /tmp/drain.out)"; else bad drain "exit $rc: $(cat /tmp/drain.out)"; fi
if [ "$(prop Result)" = success ] && [ "$(prop ExecMainStatus)" = 0 ]; then
  ok stop "Result=success, ExecMainStatus=0"
else
  bad stop "Result=$(prop Result), ExecMainStatus=$(prop ExecMainStatus)"
fi

# 6. the journal holds no secret: not the fabric key (in any form), and no
# token or rkey value.
journalctl -b -o cat >/tmp/journal.txt
key=$(tr -d '\n' </etc/mcdma/fabric.key)
leak=0
for s in "$key" "${key:0:16}" "${key:48:16}" "$(printf %s "$key" | tr a-f A-F)"; do
  grep -qF -- "$s" /tmp/journal.txt && { bad journal "fabric key material in the journal"; leak=1; }
done
if grep -niE '(rkey|token|secret|proof)[^a-z0-9]{1,3}(0x)?[0-9a-f]{8,}' /tmp/journal.txt; then
  bad journal "a token or rkey value in the journal"; leak=1
fi
[ $leak -eq 0 ] && ok journal "$(wc -l </tmp/journal.txt) lines, $(grep -c 'mcdma-rpcd' /tmp/journal.txt) from mcdma-rpcd; no key, token or rkey"

if [ $failed -eq 0 ]; then verdict pass; else verdict fail; fi
