#!/usr/bin/env bash
# Installs what is missing, builds, and runs the demo: two mcdma-rpcd daemons
# as two hosts on this machine (network namespaces joined by a veth pair, or
# loopback without root), one app on each, exchanging calls and verified
# bulk data across the link.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh; fi
bash scripts/build.sh build
bash demo/run-two-hosts-demo.sh build
