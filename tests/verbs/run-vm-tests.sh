#!/usr/bin/env bash
# Boots the Soft-RoCE VM (vm.sh) once and runs in it: the harness's own
# check (selfcheck-guest.sh), then the verbs driver's checks
# (mcdma_verbs_smoke) when they were built.
#   run-vm-tests.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: run-vm-tests.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
guest=$(mktemp -d /tmp/mcdma-vm-guest.XXXXXX)
trap 'rm -rf "$guest"' EXIT
install -m 755 "$here/selfcheck-guest.sh" "$guest/selfcheck.sh"
install -m 755 "$build/daemon/mcdma-rpcd" "$guest/mcdma-rpcd"
smoke=$build/tests/verbs/mcdma_verbs_smoke
if [ -x "$smoke" ]; then install -m 755 "$smoke" "$guest/mcdma_verbs_smoke"; fi
install -m 755 "$here/doctor-guest.sh" "$guest/doctor.sh"
install -m 755 "$build/client/tools/mcdmactl" "$guest/mcdmactl"
transport=$build/tests/verbs/mcdma_verbs_transport_check
if [ -x "$transport" ]; then install -m 755 "$transport" "$guest/mcdma_verbs_transport_check"; fi
cat > "$guest/run.sh" <<'GUEST'
#!/bin/bash
fails=0
echo "== harness self-check"
./selfcheck.sh || fails=$((fails + 1))
if [ -x ./mcdma_verbs_smoke ]; then
  echo "== verbs driver on rxe1/rxe2"
  timeout 300 ./mcdma_verbs_smoke || fails=$((fails + 1))
else
  echo "== verbs driver: not built (no libibverbs headers on the build host)"
fi
echo "== mcdmactl doctor on rxe1"
./doctor.sh . || fails=$((fails + 1))
if [ -x ./mcdma_verbs_transport_check ]; then
  echo "== verbs transport on rxe1/rxe2, each profile forced"
  timeout 600 ./mcdma_verbs_transport_check || fails=$((fails + 1))
fi
exit $fails
GUEST
chmod 755 "$guest/run.sh"
exec bash "$here/vm.sh" run "$guest"
