#!/usr/bin/env bash
# Installs everything mcdma needs to build, test and run its demo on a fresh
# Debian 12 (bookworm) machine. Run as root:
#
#   sudo scripts/install-deps.sh            # install what is missing
#   scripts/install-deps.sh --dry-run       # only list what is missing
#
# Idempotent: when every package is already installed it exits at once,
# without touching the network (no apt-get update). Otherwise it runs
# apt-get update once and installs only the missing packages.
# Exit codes: 0 done (or nothing to do), 1 failure, 2 usage.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

# One package per line, grouped by what needs it. Every name exists in
# Debian 12 (checked with apt-cache policy).
PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  # RDMA: verbs headers, user-space providers (mlx5, rxe, ...), rdma tools
  libibverbs-dev ibverbs-providers rdma-core
  # C++ libraries
  libboost-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev libssl-dev
  # tests and benchmarks (mcdma_bench_link: ZeroMQ and iperf3 rows)
  libgtest-dev libgmock-dev libbenchmark-dev libzmq3-dev iperf3
  # demo and test scripts: `ip`/`rdma` (Soft-RoCE links), ps/pgrep, python,
  # openssl (certificates for the TLS link test)
  iproute2 procps python3 openssl
  # the Soft-RoCE VM of the verbs tests (tests/verbs/vm.sh)
  qemu-system-x86 debootstrap cpio busybox-static zstd kmod
  # format and lint (.clang-format, .clang-tidy)
  clang-format clang-tidy
  # Python bindings and tests (bindings/python, tests/python); xxHash for
  # the KV hand-off's layer checksums
  python3-dev python3-pybind11 libxxhash-dev python3-numpy python3-pytest python3-torch
)

usage() {
  # The comment block at the top of this file is the help text.
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

dry_run=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-deps.sh: unknown argument: $arg" >&2; usage >&2; exit 2 ;;
  esac
done

# Echo each command before running it, so a log shows what was done.
run() {
  echo "+ $*"
  "$@"
}

if [[ -r /etc/os-release ]]; then
  # shellcheck source=/dev/null
  . /etc/os-release
  if [[ "${ID:-}" != debian || "${VERSION_ID:-}" != 12 ]]; then
    echo "install-deps.sh: warning: written for Debian 12, this is ${PRETTY_NAME:-unknown};" \
         "package names may differ" >&2
  fi
fi

# A package counts as present only when dpkg says "installed" (not merely
# unpacked or config-files, which a failed earlier run can leave behind).
missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != installed ]]; then
    missing+=("$pkg")
  fi
done

if (( ${#missing[@]} == 0 )); then
  echo "install-deps.sh: all ${#PACKAGES[@]} packages already installed; nothing to do"
  exit 0
fi

echo "install-deps.sh: ${#missing[@]} of ${#PACKAGES[@]} packages missing: ${missing[*]}"
if (( dry_run )); then
  exit 0
fi

if (( EUID != 0 )); then
  echo "install-deps.sh: must run as root to install packages (try: sudo $0)" >&2
  exit 1
fi

run apt-get update
run apt-get install -y --no-install-recommends "${missing[@]}"
echo "install-deps.sh: done"
