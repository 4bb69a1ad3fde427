#!/bin/bash
# Runs mcdma_bench_attacks (attacks_bench.cpp) under the conditions the
# limits are judged at: every process (the benchmark, the mcdma-rpcd it
# starts, the attackers) under `ulimit -n 256`, and a private 64 MiB tmpfs
# on /dev/shm (unshare -m, so the host's /dev/shm is untouched). The
# daemon runs in one network namespace and the keyless peer attacker in
# another (tests/netns/hosts.sh, a veth between them); the hostile apps run
# as another user (uid 64742) than the well-behaved ones.
#
#   sudo bench/attacks/run_attacks.sh [BUILD_DIR] [mcdma_bench_attacks options]
#   e.g. sudo bench/attacks/run_attacks.sh build --calls 2000 --attacks fds,shm
#
# Needs root (the mount namespace and the tmpfs); exits 77 (skipped)
# otherwise. Exit code: the benchmark's (1: the good app failed a call).
set -euo pipefail

if [[ "${1:-}" != "--inside" ]]; then
  build=build
  if [[ $# -gt 0 && "$1" != -* ]]; then build=$1; shift; fi
  bin="$build/bench/mcdma_bench_attacks"
  daemon="$build/daemon/mcdma-rpcd"
  for f in "$bin" "$daemon"; do
    [[ -x "$f" ]] || { echo "run_attacks.sh: $f is missing (ninja -C $build bench/mcdma_bench_attacks daemon/mcdma-rpcd)" >&2; exit 2; }
  done
  if [[ $(id -u) -ne 0 ]]; then
    echo "run_attacks.sh: skipped: needs root to mount a private 64 MiB tmpfs on /dev/shm (unshare -m)" >&2
    exit 77
  fi
  here=$(cd "$(dirname "$0")" && pwd)
  prefix=mcdma-attacks-$$
  hosts=$("$here/../../tests/netns/hosts.sh" up "$prefix")
  trap '"$here/../../tests/netns/hosts.sh" down "$prefix"' EXIT
  read -r ns_a ip_a <<<"$(sed -n 1p <<<"$hosts")"
  read -r ns_b _ <<<"$(sed -n 2p <<<"$hosts")"
  rc=0
  unshare -m "$0" --inside "$(realpath "$bin")" "$(realpath "$daemon")" \
    --daemon-netns "$ns_a" --daemon-ip "$ip_a" --peer-netns "$ns_b" "$@" || rc=$?
  exit "$rc"
fi

shift
bin=$1 daemon=$2
shift 2
mount --make-rprivate /
mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm
ulimit -n 256
exec "$bin" --daemon "$daemon" "$@"
