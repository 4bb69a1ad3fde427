#!/usr/bin/env bash
# Installs what is missing, builds, and runs the demos: two mcdma-rpcd
# daemons as two hosts on this machine (network namespaces joined by a veth
# pair, or loopback without root).
#
# First the two-host demo (demo/run-two-hosts-demo.sh): one app on each
# host, calls and verified bulk data across the link. Then the main job, the
# KV-cache hand-off (demo/kv/run-kv-demo.sh): a small torch transformer
# prefills a prompt on host-a, its KV cache crosses to host-b layer by layer
# while prefill runs, host-b decodes and checks its tokens equal a
# single-host run. Exits non-zero if either fails (77 when the KV demo
# cannot run here: no torch or no Python bindings, with the reason).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh; fi
bash scripts/build.sh build
bash demo/run-two-hosts-demo.sh build
echo
bash demo/kv/run-kv-demo.sh build
