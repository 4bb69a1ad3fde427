#!/usr/bin/env bash
# Test hosts on this machine: network namespaces, two joined by a veth pair,
# or more on one bridge.
#
#   hosts.sh up PREFIX [COUNT]  create PREFIX-a (10.240.N.1), PREFIX-b
#                               (10.240.N.2), ... COUNT of them (2 to 26,
#                               default 2); more than two are each cabled to
#                               a bridge in namespace PREFIX-br. Prints one
#                               "NAMESPACE ADDRESS" line per host.
#   hosts.sh rails PREFIX COUNT [RATE]
#                               COUNT (1 to 8) more veth pairs between PREFIX-a
#                               and PREFIX-b, rail K with 10.(240+K).N.1 and
#                               .2, each end rate-limited to RATE (tc tbf,
#                               e.g. 400mbit) when given. Prints one
#                               "ADDRESS_A ADDRESS_B" line per rail.
#   hosts.sh cut-rail PREFIX K  take rail K down (PREFIX-a's end; the other
#                               end loses carrier)
#   hosts.sh restore-rail PREFIX K
#                               bring it back up
#   hosts.sh unaddress-rail|readdress-rail PREFIX K
#                               take the address off PREFIX-b's end of rail K
#                               (the cable stays up), put it back
#   hosts.sh misroute-rail|reroute-rail PREFIX K
#                               make the ends of rail K unreachable from each
#                               other (each end's neighbour entry for the
#                               other's address names a MAC nobody has; both
#                               ends stay up and addressed), undo it
#   hosts.sh cable PREFIX X Y [RATE]
#                               a veth pair between hosts X and Y (letters,
#                               X before Y): c-Y in PREFIX-X with
#                               10.(100+i).(4j).1/30, c-X in PREFIX-Y with
#                               .2 (i, j: the letters' positions from 1);
#                               rate-limited as for rails. Prints
#                               "ADDRESS_X ADDRESS_Y".
#   hosts.sh cut-cable|restore-cable PREFIX X Y
#                               take cable X-Y down at X (Y loses carrier),
#                               bring it back
#   hosts.sh store PREFIX       (3 or more hosts) give the bridge namespace
#                               PREFIX-br the address 10.240.N.254 on the
#                               bridge, where a store may listen for every
#                               host; prints it
#   hosts.sh cut PREFIX         take every host's link down
#   hosts.sh restore PREFIX     bring them back up
#   hosts.sh down PREFIX        delete the namespaces (and with them the links)
#   hosts.sh check              exit 0 if namespaces can be made here, else 77
#
# N is derived from PREFIX so concurrent runs use different subnets. The
# addresses exist only inside namespaces this script creates; no traffic
# leaves the machine. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
set -euo pipefail
cmd=${1:?usage: hosts.sh up PREFIX [COUNT] | rails PREFIX COUNT [RATE] | cut-rail|restore-rail PREFIX K | cut|restore|down PREFIX | check}
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
    # A store that may run here (`store`) needs loopback (etcd does).
    ip -n "$br" link set lo up
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
  rails)
    rate=${4:-}
    if ! [[ $count =~ ^[0-9]+$ ]] || (( count < 1 || count > 8 )); then
      echo "hosts.sh rails: COUNT must be 1 to 8, not '$count'" >&2
      exit 2
    fi
    for (( k = 1; k <= count; k++ )); do
      ip link add "r$n-$k-a" netns "$prefix-a" type veth peer name "r$n-$k-b" netns "$prefix-b"
      ip -n "$prefix-a" addr add "10.$((240 + k)).$n.1/24" dev "r$n-$k-a"
      ip -n "$prefix-b" addr add "10.$((240 + k)).$n.2/24" dev "r$n-$k-b"
      for x in a b; do
        ip -n "$prefix-$x" link set "r$n-$k-$x" up
        if [[ -n $rate ]]; then
          ip netns exec "$prefix-$x" tc qdisc add dev "r$n-$k-$x" root tbf rate "$rate" \
            burst 256kb latency 100ms
        fi
      done
      echo "10.$((240 + k)).$n.1 10.$((240 + k)).$n.2"
    done
    # A new veth reports carrier at once but "running" (operstate up) only
    # a moment later; daemons watching their rails must not see it down.
    for (( i = 0; i < 100; i++ )); do
      down=0
      for (( k = 1; k <= count; k++ )); do
        for x in a b; do
          state=$(ip netns exec "$prefix-$x" cat "/sys/class/net/r$n-$k-$x/operstate")
          [[ $state == up ]] || down=1
        done
      done
      (( down == 0 )) && break
      sleep 0.05
    done
    ;;
  cable)
    x=${3:?usage: hosts.sh cable PREFIX X Y [RATE]}
    y=${4:?usage: hosts.sh cable PREFIX X Y [RATE]}
    rate=${5:-}
    i=$(( $(expr index "$letters" "$x") ))
    j=$(( $(expr index "$letters" "$y") ))
    if (( i == 0 || j == 0 || i >= j )); then
      echo "hosts.sh cable: X and Y must be host letters with X before Y, not '$x' '$y'" >&2
      exit 2
    fi
    ip link add "c-$y" netns "$prefix-$x" type veth peer name "c-$x" netns "$prefix-$y"
    ip -n "$prefix-$x" addr add "10.$((100 + i)).$((4 * j)).1/30" dev "c-$y"
    ip -n "$prefix-$y" addr add "10.$((100 + i)).$((4 * j)).2/30" dev "c-$x"
    ip -n "$prefix-$x" link set "c-$y" up
    ip -n "$prefix-$y" link set "c-$x" up
    if [[ -n $rate ]]; then
      ip netns exec "$prefix-$x" tc qdisc add dev "c-$y" root tbf rate "$rate" burst 256kb latency 100ms
      ip netns exec "$prefix-$y" tc qdisc add dev "c-$x" root tbf rate "$rate" burst 256kb latency 100ms
    fi
    for (( k = 0; k < 100; k++ )); do
      sx=$(ip netns exec "$prefix-$x" cat "/sys/class/net/c-$y/operstate")
      sy=$(ip netns exec "$prefix-$y" cat "/sys/class/net/c-$x/operstate")
      [[ $sx == up && $sy == up ]] && break
      sleep 0.05
    done
    echo "10.$((100 + i)).$((4 * j)).1 10.$((100 + i)).$((4 * j)).2"
    ;;
  cut-cable|restore-cable)
    x=${3:?usage: hosts.sh $cmd PREFIX X Y}
    y=${4:?usage: hosts.sh $cmd PREFIX X Y}
    state=$([[ $cmd == cut-cable ]] && echo down || echo up)
    ip -n "$prefix-$x" link set "c-$y" "$state"
    ;;
  store)
    ip -n "$prefix-br" addr add "10.240.$n.254/24" dev br0
    echo "10.240.$n.254"
    ;;
  cut-rail|restore-rail)
    k=${3:?usage: hosts.sh $cmd PREFIX K}
    state=$([[ $cmd == cut-rail ]] && echo down || echo up)
    ip -n "$prefix-a" link set "r$n-$k-a" "$state"
    ;;
  unaddress-rail|readdress-rail)
    k=${3:?usage: hosts.sh $cmd PREFIX K}
    op=$([[ $cmd == unaddress-rail ]] && echo del || echo add)
    ip -n "$prefix-b" addr "$op" "10.$((240 + k)).$n.2/24" dev "r$n-$k-b"
    ;;
  misroute-rail|reroute-rail)
    k=${3:?usage: hosts.sh $cmd PREFIX K}
    for end in a:b:2 b:a:1; do
      IFS=: read -r x y far <<< "$end"
      if [[ $cmd == misroute-rail ]]; then
        ip -n "$prefix-$x" neigh replace "10.$((240 + k)).$n.$far" lladdr 02:00:00:00:00:01 \
          nud permanent dev "r$n-$k-$x"
      else
        ip -n "$prefix-$x" neigh del "10.$((240 + k)).$n.$far" dev "r$n-$k-$x"
      fi
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
