#!/usr/bin/env bash
# Links over TLS: two daemons with certificates from one CA link up and pass
# a byte-verified echo; a daemon whose certificate comes from another CA, and
# one without TLS, never get a link. Real daemons on loopback, real
# certificates made here with openssl.
#   tls_link_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tls_link_test.sh BUILD_DIR}
command -v openssl >/dev/null || { echo "SKIP: openssl not installed"; exit 77; }
dir=$(mktemp -d /tmp/mcdma-tls.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.log; do echo "--- $f"; cat "$f"; done
  exit 1
}
ctl=$build/tools/mcdmactl/mcdmactl
rpcd=$build/daemon/mcdma-rpcd

# A CA, a second (foreign) CA, and host certificates valid for 127.0.0.1.
ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" \
    -keyout "$dir/$1.key" -out "$dir/$1.pem" 2>/dev/null
}
cert() {  # name ca
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$dir/$1.key" \
    -out "$dir/$1.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' > "$dir/$1.ext"
  openssl x509 -req -in "$dir/$1.csr" -CA "$dir/$2.pem" -CAkey "$dir/$2.key" -CAcreateserial \
    -days 2 -extfile "$dir/$1.ext" -out "$dir/$1.pem" 2>/dev/null
}
ca fabric-ca
ca other-ca
cert host-a fabric-ca
cert host-b fabric-ca
cert host-c other-ca
"$ctl" fabric-key new "$dir/fabric.key" >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pa=$(free_port); pb=$(free_port); pc=$(free_port); pd=$(free_port)
start() {  # name port [extra args...]
  local name=$1 port=$2
  shift 2
  "$rpcd" --socket "$dir/$name.sock" --host-id "$name" --fabric-key "$dir/fabric.key" \
    --listen "127.0.0.1:$port" --link-timeout-ms 1000 --heartbeat-ms 200 --reconnect-max-ms 500 \
    "$@" > "$dir/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -S "$dir/$name.sock" ] && return 0; sleep 0.05; done
  fail "$name did not start"
}
tls() {  # name
  local f=$dir/$1.toml
  printf '[tls]\ncert = "%s"\nkey = "%s"\nca = "%s"\n' "$dir/$1.pem" "$dir/$1.key" \
    "$dir/fabric-ca.pem" > "$f"
  echo "--config $f"
}
state() {  # socket peer
  "$ctl" --socket "$1" links --json | python3 -c '
import json, sys
links = [l for l in json.load(sys.stdin)["links"] if l["peer"] == sys.argv[1]]
print(links[0]["state"] if links else "none")' "$2"
}
wait_state() {  # socket peer want seconds
  for _ in $(seq $(( $4 * 20 ))); do [ "$(state "$1" "$2")" = "$3" ] && return 0; sleep 0.05; done
  return 1
}

# shellcheck disable=SC2046
start host-a "$pa" $(tls host-a)
# shellcheck disable=SC2046
start host-b "$pb" $(tls host-b) --peer "host-a=127.0.0.1:$pa"
wait_state "$dir/host-b.sock" host-a up 10 || fail "TLS link host-b -> host-a did not come up"
out=$("$ctl" --socket "$dir/host-b.sock" link test host-a --count 3 --bytes 4096) ||
  fail "link test over TLS: $out"
echo "$out" | grep -q "3 round trips of 4096 bytes verified" || fail "link test output: $out"
grep -q "(TLS)" "$dir/host-a.log" || fail "host-a did not say it serves peers over TLS"
echo "ok: TLS link up, echo verified"

# host-c: a certificate from another CA (configured to trust its own CA).
printf '[tls]\ncert = "%s"\nkey = "%s"\nca = "%s"\n' "$dir/host-c.pem" "$dir/host-c.key" \
  "$dir/other-ca.pem" > "$dir/host-c.toml"
start host-c "$pc" --config "$dir/host-c.toml" --peer "host-a=127.0.0.1:$pa"
# host-d: no TLS at all.
start host-d "$pd" --peer "host-a=127.0.0.1:$pa"
sleep 3
for h in host-c host-d; do
  s=$(state "$dir/$h.sock" host-a)
  [ "$s" != up ] || fail "$h got a link to host-a without a certificate from the fabric's CA"
  err=$("$ctl" --socket "$dir/$h.sock" links --json | python3 -c '
import json, sys; print(json.load(sys.stdin)["links"][0]["last_error"])')
  [ -n "$err" ] || fail "$h: link is $s but says no reason"
  echo "ok: $h refused ($s): ${err:0:100}"
done
[ "$(state "$dir/host-a.sock" host-c)" = none ] || fail "host-a lists a link from host-c"
[ "$(state "$dir/host-a.sock" host-d)" = none ] || fail "host-a lists a link from host-d"
echo "PASS"
