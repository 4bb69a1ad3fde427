#!/usr/bin/env bash
# Two test hosts on this machine: network namespaces joined by a veth pair.
#
#   hosts.sh up PREFIX       create PREFIX-a (10.240.N.1) and PREFIX-b (10.240.N.2)
#   hosts.sh cut PREFIX      take the link down (both ends)
#   hosts.sh restore PREFIX  bring it back up
#   hosts.sh down PREFIX     delete both namespaces (and with them the veth)
#   hosts.sh check           exit 0 if namespaces can be made here, else 77
#
# N is derived from PREFIX so concurrent runs use different subnets. The
# addresses exist only inside namespaces this script creates; no traffic
# leaves the machine. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
set -euo pipefail
cmd=${1:?usage: hosts.sh up|cut|restore|down PREFIX | check}
prefix=${2:-mcdma}
n=$(( $(printf '%s' "$prefix" | cksum | cut -d' ' -f1) % 250 + 1 ))
a=$prefix-a
b=$prefix-b
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
    ;;
  cut)
    ip -n "$a" link set "v$n-a" down
    ip -n "$b" link set "v$n-b" down
    ;;
  restore)
    ip -n "$a" link set "v$n-a" up
    ip -n "$b" link set "v$n-b" up
    ;;
  down)
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    ;;
  *) echo "usage: hosts.sh up|cut|restore|down PREFIX | check" >&2; exit 2 ;;
esac
