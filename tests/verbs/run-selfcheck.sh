#!/usr/bin/env bash
# Boots the Soft-RoCE VM (vm.sh) and runs the harness self-check in it.
#   run-selfcheck.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: run-selfcheck.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
guest=$(mktemp -d /tmp/mcdma-vm-guest.XXXXXX)
trap 'rm -rf "$guest"' EXIT
install -m 755 "$here/selfcheck-guest.sh" "$guest/run.sh"
install -m 755 "$build/daemon/mcdma-rpcd" "$guest/mcdma-rpcd"
exec bash "$here/vm.sh" run "$guest"
