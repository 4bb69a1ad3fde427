#!/usr/bin/env bash
# Boots the Soft-RoCE VM (vm.sh) once and runs in it, against the binaries
# built on this host:
#   1. the harness's own check (selfcheck-guest.sh);
#   2. the verbs driver's owners (mcdma_verbs_smoke), `mcdmactl doctor`
#      on rxe1 (doctor-guest.sh) and the validation run a person with the
#      hardware makes, `mcdmactl validate` between two daemons on
#      rxe1/rxe2 (validate-guest.sh);
#   3. the verbs transport under each profile forced
#      (mcdma_verbs_transport_check), and the transport conformance suite
#      once per profile (mcdma_verbs_conformance);
#   4. the cross-host suite of the tcp transport (tests/integration, the
#      `verbs` variant of every Hosts/Link* test): two real daemons linked
#      over verbs on rxe1/rxe2, all of it under the first profile, and the
#      calls, bulk and killed-peer tests under the others
#      (MCDMA_VERBS_PROFILE);
#   5. the verbs rails suite (VerbsRails.*): three daemons in the one
#      namespace, host-a with three Soft-RoCE devices of two profiles,
#      host-b with two, host-c with one (guest-init wires them and exports
#      MCDMA_RAIL_HOSTS; a wiring that fails its checks fails this step).
# The integration binary names its daemon, tools and test app by their
# build paths: the guest links those paths to its copies.
#   run-vm-tests.sh BUILD_DIR [PROFILE...]   (default: all three profiles)
set -euo pipefail
build=$(cd "${1:?usage: run-vm-tests.sh BUILD_DIR [PROFILE...]}" && pwd)
shift
profiles=${*:-linux-rc mcdma-cx5 apple-tb5}
here=$(cd "$(dirname "$0")" && pwd)
guest=$(mktemp -d /tmp/mcdma-vm-guest.XXXXXX)
trap 'rm -rf "$guest"' EXIT
install -m 755 "$here/selfcheck-guest.sh" "$guest/selfcheck.sh"
install -m 755 "$here/doctor-guest.sh" "$guest/doctor.sh"
install -m 755 "$here/validate-guest.sh" "$guest/validate.sh"
install -m 755 "$build/daemon/mcdma-rpcd" "$guest/mcdma-rpcd"
install -m 755 "$build/tools/mcdmactl/mcdmactl" "$guest/mcdmactl"
for f in tests/verbs/mcdma_verbs_smoke tests/verbs/mcdma_verbs_transport_check \
  tests/verbs/mcdma_verbs_conformance \
  tests/integration/mcdma_integration_tests tests/integration/mcdma_testapp; do
  if [ -x "$build/$f" ]; then install -m 755 "$build/$f" "$guest/$(basename "$f")"; fi
done
{
  echo '#!/bin/bash'
  echo "build='$build'"
  echo "profiles='$profiles'"
  cat <<'GUEST'
# Kernel messages (rxe's "Failed sending ACK" under load) stay off the console.
dmesg -n 1 2>/dev/null || true
fails=0
step() { echo "== $1 (at ${SECONDS} s)"; }
step "harness self-check"
./selfcheck.sh || fails=$((fails + 1))
if [ -x ./mcdma_verbs_smoke ]; then
  step "verbs driver on rxe1/rxe2"
  timeout 300 ./mcdma_verbs_smoke || fails=$((fails + 1))
else
  step "verbs driver: not built (no libibverbs headers on the build host)"
fi
step "mcdmactl doctor on rxe1"
./doctor.sh . || fails=$((fails + 1))
step "the validation run: mcdmactl validate host-a -> host-b over verbs, beside perftest"
timeout 900 ./validate.sh . || fails=$((fails + 1))
if [ -x ./mcdma_verbs_transport_check ]; then
  step "verbs transport on rxe1/rxe2, each profile forced"
  timeout 600 ./mcdma_verbs_transport_check || fails=$((fails + 1))
fi
if [ -x ./mcdma_verbs_conformance ]; then
  step "transport conformance suite over verbs, each profile"
  timeout 300 ./mcdma_verbs_conformance --gtest_brief=1 || fails=$((fails + 1))
fi
if [ -x ./mcdma_integration_tests ]; then
  mkdir -p "$build/daemon" "$build/tools/mcdmactl" "$build/tests/integration"
  ln -sf /opt/host/mcdma-rpcd "$build/daemon/mcdma-rpcd"
  ln -sf /opt/host/mcdmactl "$build/tools/mcdmactl/mcdmactl"
  ln -sf /opt/host/mcdma_testapp "$build/tests/integration/mcdma_testapp"
  export MCDMA_VERBS_HOSTS=rxe1:veth0:10.0.1.1,rxe2:veth1:10.0.1.2
  # The whole suite under the first profile; under the others, the tests
  # whose traffic the profile shapes: calls, bulk, and failures in flight
  # (a killed peer; a cut wire fails the same QPs the same way). The key,
  # ticket, export-list and bounds checks, the link test and the
  # orderly-stop paths are the same control plane and the same posted work
  # under every profile.
  first=1
  for p in $profiles; do
    filter='Hosts/Link*.*/verbs'
    if [ $first = 0 ]; then
      filter='Hosts/LinkCalls.*/verbs:Hosts/LinkBulk.*/verbs:Hosts/LinkFailure.KilledPeer*/verbs'
    fi
    first=0
    step "cross-host suite over verbs, profile $p"
    MCDMA_VERBS_PROFILE=$p timeout 1200 ./mcdma_integration_tests \
      --gtest_filter="$filter" --gtest_brief=1 || fails=$((fails + 1))
  done
  if [ -n "${MCDMA_RAIL_ERROR:-}" ]; then
    step "verbs rails suite: not run: $MCDMA_RAIL_ERROR"
    fails=$((fails + 1))
  else
    step "verbs rails suite: three daemons, six Soft-RoCE devices"
    timeout 900 ./mcdma_integration_tests --gtest_filter='VerbsRails.*' --gtest_brief=1 ||
      fails=$((fails + 1))
  fi
fi
echo "== done (at ${SECONDS} s), $fails step(s) failed"
exit $fails
GUEST
} > "$guest/run.sh"
chmod 755 "$guest/run.sh"
export MCDMA_VM_TIMEOUT=${MCDMA_VM_TIMEOUT:-3000}
exec bash "$here/vm.sh" run "$guest"
