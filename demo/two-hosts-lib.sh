# shellcheck shell=bash
# Sourced by the two-host demos (run-two-hosts-demo.sh, kv/run-kv-demo.sh):
# starts two linked mcdma-rpcd daemons as two hosts on this machine.
#
#   source demo/two-hosts-lib.sh
#   two_hosts_init BUILD_DIR   # temp dir, EXIT trap; sets build, dir, ctl
#   two_hosts_start            # hosts, fabric key, daemons host-a and host-b, link up
#   "${in_a[@]}" CMD &         # run CMD on host-a (in_b: host-b); pids+=($!)
#
# Hosts are network namespaces joined by a veth pair when this user may
# create them (root), else both daemons run on loopback with their own
# sockets and ports. After two_hosts_start: $dir/a.sock and $dir/b.sock are
# the daemons' sockets, host-b links to host-a with a fresh fabric key.
# Daemon logs (warnings and up) go to $dir/{a,b}.rpcd.log. On exit the trap
# kills every pid in `pids` (callers add theirs), shows the end of the
# daemon logs if the script failed, deletes the namespaces and the temp
# dir; the caller's exit status is kept.

_two_hosts_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pids=()
netns=0

two_hosts_cleanup() {
  local rc=$? p h
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for h in a b; do
      [ -s "$dir/$h.rpcd.log" ] && { echo "== host-$h daemon log (last lines)"; tail -20 "$dir/$h.rpcd.log"; }
    done
  fi
  if [ "$netns" = 1 ]; then bash "$_two_hosts_lib/../tests/netns/hosts.sh" down "$prefix" >/dev/null 2>&1 || true; fi
  rm -rf "$dir"
}

two_hosts_init() {
  build=${1:-build}
  ctl=$build/tools/mcdmactl/mcdmactl
  dir=$(mktemp -d /tmp/mcdma-demo2.XXXXXX)
  prefix=mcdemo$$
  trap two_hosts_cleanup EXIT
}

two_hosts_start() {
  local hosts=$_two_hosts_lib/../tests/netns/hosts.sh
  if bash "$hosts" check 2>/dev/null; then
    netns=1
    read -r _ addr_a < <(bash "$hosts" up "$prefix" | sed -n 1p)
    addr_b=${addr_a%.1}.2
    in_a=(ip netns exec "$prefix-a")
    in_b=(ip netns exec "$prefix-b")
    port_a=7471
    port_b=7471
    echo "== two hosts: network namespaces $prefix-a ($addr_a) and $prefix-b ($addr_b), joined by a veth pair"
  else
    addr_a=127.0.0.1
    addr_b=127.0.0.1
    in_a=()
    in_b=()
    # Two free ports on loopback (the default 7471 may belong to a real daemon).
    free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
    port_a=$(free_port)
    port_b=$(free_port)
    echo "== two hosts on loopback (network namespaces need root); each daemon has its own socket and ports"
  fi

  "$ctl" fabric-key new "$dir/fabric.key" > /dev/null
  echo "== fabric key $dir/fabric.key (mode 0600), shared by both daemons"
  echo "== host-a: mcdma-rpcd on $dir/a.sock, peers on $addr_a:$port_a"
  "${in_a[@]}" "$build/daemon/mcdma-rpcd" --socket "$dir/a.sock" --host-id host-a \
    --fabric-key "$dir/fabric.key" --listen "$addr_a:$port_a" --log-level warn 2> "$dir/a.rpcd.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -S "$dir/a.sock" ] && break; sleep 0.05; done
  echo "== host-b: mcdma-rpcd on $dir/b.sock, peers on $addr_b:$port_b, linking to host-a"
  "${in_b[@]}" "$build/daemon/mcdma-rpcd" --socket "$dir/b.sock" --host-id host-b \
    --fabric-key "$dir/fabric.key" --listen "$addr_b:$port_b" \
    --peer "host-a=$addr_a:$port_a" --log-level warn 2> "$dir/b.rpcd.log" &
  pids+=($!)
  for _ in $(seq 200); do
    "$ctl" --socket "$dir/b.sock" links --json 2>/dev/null | grep -q '"state":"up"' && break
    sleep 0.05
  done
  "$ctl" --socket "$dir/b.sock" links
}

# two_hosts_handoff CONSUMER_NAME PRODUCER_NAME CONSUMER_CMD... -- PRODUCER_CMD...
# The KV demos' hand-off: the consumer starts first on host-b (output in
# $dir/b.log) and must print "waiting for hand-off" within 60 s; then the
# producer starts on host-a ($dir/a.log). Whichever ends first: if it
# failed, the other would only wait for it until its timeout, so it is
# ended. Prints both outputs; sets rc_a and rc_b ("-": never started).
two_hosts_handoff() {
  local consumer_name=$1 producer_name=$2 first rc other pid_a pid_b
  shift 2
  local -a consumer=() producer=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do consumer+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  producer=("$@")
  echo "== host-b: $consumer_name (consumer) starts first and waits for the hand-off"
  "${in_b[@]}" "${consumer[@]}" > "$dir/b.log" 2>&1 &
  pid_b=$!
  pids+=("$pid_b")
  for _ in $(seq 600); do
    grep -q "waiting for hand-off" "$dir/b.log" 2>/dev/null && break
    kill -0 "$pid_b" 2>/dev/null || break
    sleep 0.1
  done
  rc_a=-
  rc_b=0
  if ! grep -q "waiting for hand-off" "$dir/b.log"; then
    kill "$pid_b" 2>/dev/null || true
    wait "$pid_b" || rc_b=$?
    echo "== $consumer_name did not get ready (exit status $rc_b); $producer_name not started"
  else
    echo "== host-a: $producer_name (producer) prefills and publishes layer by layer"
    "${in_a[@]}" "${producer[@]}" > "$dir/a.log" 2>&1 &
    pid_a=$!
    pids+=("$pid_a")
    first=
    wait -n -p first "$pid_a" "$pid_b" && rc=0 || rc=$?
    if [ "$first" = "$pid_a" ]; then rc_a=$rc; other=$pid_b; else rc_b=$rc; other=$pid_a; fi
    if [ "$rc" != 0 ]; then kill "$other" 2>/dev/null || true; fi
    wait "$other" && rc=0 || rc=$?
    if [ "$other" = "$pid_a" ]; then rc_a=$rc; else rc_b=$rc; fi
    echo "== host-a output ($producer_name)"
    cat "$dir/a.log" 2>/dev/null || true  # missing if it was ended before it started
  fi
  echo "== host-b output ($consumer_name)"
  cat "$dir/b.log"
}
