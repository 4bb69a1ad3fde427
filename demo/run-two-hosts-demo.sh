#!/usr/bin/env bash
# The two-host demo: two mcdma-rpcd daemons as two hosts on this machine —
# in two network namespaces joined by a veth pair when this user may create
# them (root), else both on loopback — linked with a fresh fabric key
# (two-hosts-lib.sh). App A on host-a serves and exports a buffer to host-b;
# app B on host-b calls A across the link, writes A's buffer, reads it back
# and verifies every byte (digests taken by B and, in its own mapping, by A).
# Exits non-zero if anything fails.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=two-hosts-lib.sh
source "$(dirname "$0")/two-hosts-lib.sh"
two_hosts_init "${1:-build}"
two_hosts_start

echo "== app A on host-a"
mkfifo "$dir/a.in"
"${in_a[@]}" "$build/demo/mcdma-demo" serve --socket "$dir/a.sock" --allow-peer host-b \
  < "$dir/a.in" > "$dir/a.out" &
pids+=($!)
exec 3> "$dir/a.in"   # holds A's stdin open; A serves until it closes
for _ in $(seq 200); do grep -q READY "$dir/a.out" 2>/dev/null && break; sleep 0.05; done
grep -v READY "$dir/a.out"

echo "== app B on host-b, calling host-a/demo.echo and using host-a's export across the link"
"${in_b[@]}" "$build/demo/mcdma-demo" client --socket "$dir/b.sock" --peer host-a

echo "== mcdmactl link test host-a (on host-b): byte-verified echo between the daemons"
"$ctl" --socket "$dir/b.sock" link test host-a --count 5 --bytes 4096 | tail -1
echo "== mcdmactl links (on host-b)"
"$ctl" --socket "$dir/b.sock" links
exec 3>&-
echo "== two-host demo passed"
