#!/usr/bin/env bash
# The local demo: one mcdma-rpcd and two apps on this host. App A serves and
# exports a buffer; app B calls it, writes A's buffer through the daemon,
# reads it back and verifies every byte. Exits non-zero if anything fails.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d /tmp/mcdma-demo.XXXXXX)
sock=$dir/rpcd.sock
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

echo "== starting mcdma-rpcd on $sock"
"$build/daemon/mcdma-rpcd" --socket "$sock" --log-level warn &
pids+=($!)
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

echo "== starting app A"
mkfifo "$dir/a.in"
"$build/demo/mcdma-demo" serve --socket "$sock" < "$dir/a.in" > "$dir/a.out" &
pids+=($!)
exec 3> "$dir/a.in"   # holds A's stdin open; A serves until it closes
for _ in $(seq 200); do grep -q READY "$dir/a.out" 2>/dev/null && break; sleep 0.05; done
grep -v READY "$dir/a.out"

echo "== starting app B"
"$build/demo/mcdma-demo" client --socket "$sock"

echo "== mcdmactl status"
if [ -x "$build/tools/mcdmactl/mcdmactl" ]; then
  "$build/tools/mcdmactl/mcdmactl" --socket "$sock" status
fi
exec 3>&-
echo "== demo passed"
