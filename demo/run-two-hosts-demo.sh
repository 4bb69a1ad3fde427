#!/usr/bin/env bash
# The two-host demo: two mcdma-rpcd daemons as two hosts on this machine —
# in two network namespaces joined by a veth pair when this user may create
# them (root), else both on loopback — linked with a fresh fabric key. App A
# on host-a serves and exports a buffer to host-b; app B on host-b calls A
# across the link, writes A's buffer, reads it back and verifies every byte
# (digests taken by B and, in its own mapping, by A). Exits non-zero if
# anything fails.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
hosts=$here/../tests/netns/hosts.sh
dir=$(mktemp -d /tmp/mcdma-demo2.XXXXXX)
prefix=mcdemo$$
pids=()
netns=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$netns" = 1 ]; then bash "$hosts" down "$prefix" >/dev/null 2>&1 || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
ctl=$build/client/tools/mcdmactl

if bash "$hosts" check 2>/dev/null; then
  netns=1
  read -r _ addr_a < <(bash "$hosts" up "$prefix" | sed -n 1p)
  addr_b=${addr_a%.1}.2
  in_a=(ip netns exec "$prefix-a")
  in_b=(ip netns exec "$prefix-b")
  echo "== two hosts: network namespaces $prefix-a ($addr_a) and $prefix-b ($addr_b), joined by a veth pair"
else
  addr_a=127.0.0.1
  addr_b=127.0.0.1
  in_a=()
  in_b=()
  echo "== two hosts on loopback (network namespaces need root); each daemon has its own socket and ports"
fi
if [ "$netns" = 1 ]; then
  port_a=7471
  port_b=7471
else
  # Two free ports on loopback (the default 7471 may belong to a real daemon).
  free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  port_a=$(free_port)
  port_b=$(free_port)
fi

"$ctl" fabric-key new "$dir/fabric.key" > /dev/null
echo "== fabric key $dir/fabric.key (mode 0600), shared by both daemons"
echo "== host-a: mcdma-rpcd on $dir/a.sock, peers on $addr_a:$port_a"
"${in_a[@]}" "$build/daemon/mcdma-rpcd" --socket "$dir/a.sock" --host-id host-a \
  --fabric-key "$dir/fabric.key" --listen "$addr_a:$port_a" --log-level warn &
pids+=($!)
for _ in $(seq 200); do [ -S "$dir/a.sock" ] && break; sleep 0.05; done
echo "== host-b: mcdma-rpcd on $dir/b.sock, peers on $addr_b:$port_b, linking to host-a"
"${in_b[@]}" "$build/daemon/mcdma-rpcd" --socket "$dir/b.sock" --host-id host-b \
  --fabric-key "$dir/fabric.key" --listen "$addr_b:$port_b" \
  --peer "host-a=$addr_a:$port_a" --log-level warn &
pids+=($!)
for _ in $(seq 200); do
  "$ctl" --socket "$dir/b.sock" links --json 2>/dev/null | grep -q '"state":"up"' && break
  sleep 0.05
done
"$ctl" --socket "$dir/b.sock" links

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
