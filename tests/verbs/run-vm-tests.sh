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
exit $fails
GUEST
chmod 755 "$guest/run.sh"
exec bash "$here/vm.sh" run "$guest"
