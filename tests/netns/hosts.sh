#!/usr/bin/env bash
# Test hosts on this machine: network namespaces, two joined by a veth pair,
# or more on one bridge.
#
#   hosts.sh up PREFIX [COUNT]  create PREFIX-a (10.240.N.1), PREFIX-b
#                               (10.240.N.2), ... COUNT of them (2 to 26,
#                               default 2); more than two are each cabled to
#                               a bridge in namespace PREFIX-br. Prints one
#                               "NAMESPACE ADDRESS" line per host.
#   hosts.sh cut PREFIX         take every host's link down
#   hosts.sh restore PREFIX     bring them back up
#   hosts.sh down PREFIX        delete the namespaces (and with them the links)
#   hosts.sh check              exit 0 if namespaces can be made here, else 77
#
# N is derived from PREFIX so concurrent runs use different subnets. The
# addresses exist only inside namespaces this script creates; no traffic
# leaves the machine. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
set -euo pipefail
cmd=${1:?usage: hosts.sh up PREFIX [COUNT] | cut|restore|down PREFIX | check}
prefix=${2:-mcdma}
count=${3:-2}
n=$(( $(printf '%s' "$prefix" | cksum | cut -d' ' -f1) % 250 + 1 ))
letters=abcdefghijklmnopqrstuvwxyz
# The host suffixes (a, b, ...) of PREFIX's namespaces that exist now.
hosts() {
  ip netns list | awk '{print $1}' | sed -n "s/^$prefix-\([a-z]\)\$/\1/p" | sort
}
case "$cmd" in
  check)
    if ! command -v ip >/dev/null; then
      echo "network namespaces unavailable: no ip(8) (install iproute2)" >&2
      exit 77
    fi
    probe=mcdma-probe-$$
    if ip netns add "$probe" 2>/dev/null; then ip netns del "$probe"; exit 0; fi
    echo "network namespaces unavailable (need root and CAP_SYS_ADMIN)" >&2
    exit 77
    ;;
  up)
    if ! [[ $count =~ ^[0-9]+$ ]] || (( count < 2 || count > 26 )); then
      echo "hosts.sh up: COUNT must be 2 to 26, not '$count'" >&2
      exit 2
    fi
    if (( count == 2 )); then
      a=$prefix-a
      b=$prefix-b
      ip netns add "$a"
      ip netns add "$b"
      ip link add "v$n-a" netns "$a" type veth peer name "v$n-b" netns "$b"
      ip -n "$a" addr add "10.240.$n.1/24" dev "v$n-a"
      ip -n "$b" addr add "10.240.$n.2/24" dev "v$n-b"
      for ns in "$a" "$b"; do
        ip -n "$ns" link set lo up
      done
      ip -n "$a" link set "v$n-a" up
      ip -n "$b" link set "v$n-b" up
      echo "$a 10.240.$n.1"
      echo "$b 10.240.$n.2"
      exit 0
    fi
    br=$prefix-br
    ip netns add "$br"
    ip -n "$br" link add br0 type bridge
    ip -n "$br" link set br0 up
    for (( i = 1; i <= count; i++ )); do
      x=${letters:i-1:1}
      ns=$prefix-$x
      ip netns add "$ns"
      ip link add "v$n-$x" netns "$ns" type veth peer name "b$n-$x" netns "$br"
      ip -n "$br" link set "b$n-$x" master br0
      ip -n "$br" link set "b$n-$x" up
      ip -n "$ns" addr add "10.240.$n.$i/24" dev "v$n-$x"
      ip -n "$ns" link set lo up
      ip -n "$ns" link set "v$n-$x" up
    done
    for (( i = 1; i <= count; i++ )); do
      echo "$prefix-${letters:i-1:1} 10.240.$n.$i"
    done
    ;;
  cut|restore)
    state=$([[ $cmd == cut ]] && echo down || echo up)
    for x in $(hosts); do
      ip -n "$prefix-$x" link set "v$n-$x" "$state"
    done
    ;;
  down)
    for x in $(hosts); do
      ip netns del "$prefix-$x" 2>/dev/null || true
    done
    ip netns del "$prefix-br" 2>/dev/null || true
    ;;
  *) echo "usage: hosts.sh up PREFIX [COUNT] | cut|restore|down PREFIX | check" >&2; exit 2 ;;
esac
