#!/bin/bash
# The harness's own check, run inside the VM: the guest's libibverbs sees
# both rxe devices, an RC ping-pong crosses the veth between them with
# byte-checked payloads, and a host-built binary runs. A failure here means
# the harness, not the project, is broken.
set -u
read -r dev1 dev2 <<< "$MCDMA_RXE_DEVS"
read -r addr1 _ <<< "$MCDMA_RXE_ADDRS"
read -r gid1 gid2 <<< "$MCDMA_RXE_GIDS"
fails=0
check() {  # label, command...
  local label=$1
  shift
  if "$@" > /tmp/check.log 2>&1; then
    echo "PASS $label"
  else
    echo "FAIL $label"
    tail -n 20 /tmp/check.log
    fails=$((fails + 1))
  fi
}
check "ibv_devices lists $dev1 and $dev2" sh -c "ibv_devices | grep -q $dev1 && ibv_devices | grep -q $dev2"
check "RoCE v2 GIDs found" test "$gid1" != none -a "$gid2" != none
ibv_rc_pingpong -d "$dev1" -g "$gid1" -n 200 -s 4096 -c > /tmp/srv.log 2>&1 &
srv=$!
sleep 1
check "RC ping-pong $dev2 -> $dev1 over the veth (4 KiB, payload checked)" \
  timeout 120 ibv_rc_pingpong -d "$dev2" -g "$gid2" -n 200 -s 4096 -c "$addr1"
wait "$srv" || { echo "FAIL ping-pong server"; cat /tmp/srv.log; fails=$((fails + 1)); }
check "host-built mcdma-rpcd runs in the guest" ./mcdma-rpcd --version
exit $fails
