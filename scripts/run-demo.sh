#!/usr/bin/env bash
# Installs what is missing, builds, and runs the demo: one mcdma-rpcd and two
# apps exchanging calls and verified bulk data through it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh; fi
bash scripts/build.sh build
bash demo/run-local-demo.sh build
