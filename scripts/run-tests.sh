#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit and
# integration, against real daemons and real client processes).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh; fi
bash scripts/build.sh build
rc=0
ctest --test-dir build --output-on-failure --timeout 900 || rc=$?
if [ "$rc" != 0 ]; then bash scripts/failure-digest.sh build; fi
exit "$rc"
