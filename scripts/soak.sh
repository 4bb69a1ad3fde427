#!/usr/bin/env bash
# Usage: scripts/soak.sh MINUTES [--seed N] [--build DIR]
#
# 8 apps on two hosts (two network namespaces joined by a veth, a daemon in
# each, linked over tcp) call, notify, write and read each other for MINUTES
# while apps are killed (and started again) and the wire is cut (and
# restored) at random moments (--seed fixes them and the traffic; default
# 1). Prints operations by kind, failures by code, lost and duplicated
# messages and both daemons' RSS and open descriptors at the start and the
# end. Exit 0: every check passed; 1: one failed; 77: cannot run here (needs
# root for the namespaces); 2: usage or not built. Needs BUILD/tests/soak/
# mcdma_soak (default build/: cmake --build build --target mcdma_soak).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/soak.sh MINUTES [--seed N] [--build DIR]" >&2; exit 2; }
[ $# -ge 1 ] || usage
minutes=$1
shift
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || usage
seed=1
build=${MCDMA_BUILD_DIR:-build}
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
    --build) [ $# -ge 2 ] || usage; build=$2; shift 2 ;;
    *) usage ;;
  esac
done
bin=$build/tests/soak/mcdma_soak
if [ ! -x "$bin" ]; then
  echo "soak: $bin is not built (cmake --build $build --target mcdma_soak)" >&2
  exit 2
fi
exec "$bin" run --minutes "$minutes" --seed "$seed"
