#!/usr/bin/env bash
# Installs everything mcdma needs to build, test and run its demo on a fresh
# Debian 12 (bookworm) machine. Run as root:
#
#   scripts/install-deps.sh                 # as root: install what is missing
#   scripts/install-deps.sh --dry-run       # only list what is missing
#   scripts/install-deps.sh --with-vllm     # also the vLLM venv (below)
#
# Idempotent: when every package is already installed (and the dev venv
# below has its pinned packages) it exits at once, without touching the network
# (no apt-get update). Otherwise it runs apt-get update once and installs
# only the missing packages, then creates what is missing of the dev venv.
#
# Dev venv: /opt/mcdma-dev/venv, made from Debian's /usr/bin/python3 with
# --system-site-packages, holding PyPI's `ziglang` (zig's clang, the
# cross-compiler of the macOS portability test, tests/portability/) and
# `clang-tidy` (LLVM 22: it skips the matchers over system headers, which
# makes ctest Style.ClangTidy about four times faster than Debian's 14),
# and `mlx` (its CPU build, mlx-cpu) with `mlx-lm`: the MLX decoder of the
# KV hand-off (mcdma.mlx, ctest Demo.KVHandoffMLX and Python.MLX).
# NIXL venv: /opt/mcdma-dev/nixl, the same kind of venv holding PyPI's
# `nixl` (it bundles UCX; about 430 MB), for the NIXL row of
# bench/kv/kv_bench.py, in a venv of its own so that its wheels cannot
# change what the dev venv's packages see.
# vLLM venv (only with --with-vllm): /opt/mcdma-dev/vllm, the same kind of
# venv holding PyPI's `vllm` (with its own torch and CUDA libraries: about
# 6 GB, several minutes to fetch), for tests/python/test_vllm_connector.py
# (ctest Python.VLLM, registered when this venv exists). CI does not install
# it; without it that test file skips, saying why.
# Run zig as: /opt/mcdma-dev/venv/bin/python -m ziglang c++ ...
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
  # the metrics endpoint (metrics_listen): Prometheus's C++ client
  prometheus-cpp-dev
  # tests and benchmarks (mcdma_bench_link: ZeroMQ and iperf3 rows)
  libgtest-dev libgmock-dev libbenchmark-dev libzmq3-dev iperf3
  # demo and test scripts: `ip`/`rdma` (Soft-RoCE links), ps/pgrep, python,
  # openssl (certificates for the TLS link test)
  iproute2 procps python3 openssl
  # the Soft-RoCE VM of the verbs tests (tests/verbs/vm.sh)
  qemu-system-x86 debootstrap cpio busybox-static zstd kmod
  # format (.clang-format); clang-tidy comes from the dev venv below
  clang-format
  # the fuzzers (fuzz/, scripts/fuzz.sh): clang 14 and its libFuzzer runtime
  clang libclang-rt-14-dev
  # Python bindings and tests (bindings/python, tests/python); xxHash for
  # the KV hand-off's layer checksums
  python3-dev python3-pybind11 libxxhash-dev python3-numpy python3-pytest python3-torch
  # the dev venv below (python3 -m venv)
  python3-venv
  # packaging: man pages from --help (packaging/manpages.cmake), the Debian
  # packages (scripts/build-debs.sh: dpkg-deb, dpkg-shlibdeps)
  help2man dpkg-dev
  # the metrics test scrapes two daemons with a real Prometheus server
  prometheus
  # fabric membership tests (tests/fabric): a real etcd
  etcd-server etcd-client
)

# The dev venv with zig and clang-tidy (see the top of this file). Never the
# system Python: pip installs only into this venv. ziglang is pinned: a new
# zig brings a new clang and libc++, which may reject code the old one took;
# bump it on purpose (and rerun ctest -L portability). clang-tidy is pinned: a new one brings new checks
# (bump it on purpose, and rerun ctest -R Style.ClangTidy).
DEV_VENV=/opt/mcdma-dev/venv
DEV_PYTHON=$DEV_VENV/bin/python
# mlx and mlx-lm are pinned: mcdma.mlx fills mlx-lm's KVCache through its
# `state` (bump them on purpose and rerun ctest -R MLX).
VENV_PINS=(ziglang==0.17.1 clang-tidy==22.1.8 mlx==0.32.4 mlx-cpu==0.32.4 mlx-lm==0.32.2)
# nixl is pinned: bench/kv/kv_nixl.py sets its agent's progress thread
# through the bindings (bump it on purpose and rerun bench/kv/kv_bench.py).
NIXL_VENV=/opt/mcdma-dev/nixl
NIXL_PINS=(nixl==1.5.1)
# vllm is pinned: mcdma.vllm implements vLLM's KVConnectorBase_V1, whose
# hooks change between releases (bump it on purpose and rerun ctest -R VLLM).
VLLM_VENV=/opt/mcdma-dev/vllm
VLLM_PINS=(vllm==0.33.0)

# venv_ready PYTHON PIN...: the venv's python exists and has every pin.
venv_ready() {
  local python=$1 pin
  shift
  [[ -x "$python" ]] || return 1
  for pin in "$@"; do
    [[ "$("$python" -c "import importlib.metadata as m; print(m.version('${pin%%==*}'))" \
          2>/dev/null)" == "${pin##*==}" ]] || return 1
  done
}

# make_venv DIR PIN...: creates the venv (from Debian's python3, seeing its
# site packages) where missing, then installs the pins into it.
make_venv() {
  local dir=$1
  shift
  if [[ ! -x "$dir/bin/python" ]]; then
    run mkdir -p "$(dirname "$dir")"
    run /usr/bin/python3 -m venv --system-site-packages "$dir"
  fi
  run "$dir/bin/python" -m pip install --disable-pip-version-check "$@"
}

usage() {
  # The comment block at the top of this file is the help text.
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

dry_run=0
with_vllm=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    --with-vllm) with_vllm=1 ;;
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

venv_missing=0
venv_ready "$DEV_PYTHON" "${VENV_PINS[@]}" || venv_missing=1
nixl_missing=0
venv_ready "$NIXL_VENV/bin/python" "${NIXL_PINS[@]}" || nixl_missing=1
vllm_missing=0
if (( with_vllm )); then
  venv_ready "$VLLM_VENV/bin/python" "${VLLM_PINS[@]}" || vllm_missing=1
fi

if (( ${#missing[@]} == 0 && ! venv_missing && ! nixl_missing && ! vllm_missing )); then
  echo "install-deps.sh: all ${#PACKAGES[@]} packages already installed," \
       "$DEV_VENV has ${VENV_PINS[*]} and $NIXL_VENV has ${NIXL_PINS[*]}; nothing to do"
  exit 0
fi

if (( ${#missing[@]} > 0 )); then
  echo "install-deps.sh: ${#missing[@]} of ${#PACKAGES[@]} packages missing: ${missing[*]}"
fi
if (( venv_missing )); then
  echo "install-deps.sh: $DEV_VENV is missing or lacks one of ${VENV_PINS[*]}"
fi
if (( nixl_missing )); then
  echo "install-deps.sh: $NIXL_VENV is missing or lacks ${NIXL_PINS[*]}"
fi
if (( vllm_missing )); then
  echo "install-deps.sh: $VLLM_VENV is missing or lacks ${VLLM_PINS[*]}"
fi
if (( dry_run )); then
  exit 0
fi

if (( EUID != 0 )); then
  echo "install-deps.sh: must run as root to install packages (as root, or with sudo where it is installed)" >&2
  exit 1
fi

if (( ${#missing[@]} > 0 )); then
  run apt-get update
  run apt-get install -y --no-install-recommends "${missing[@]}"
fi

if (( venv_missing )); then
  make_venv "$DEV_VENV" "${VENV_PINS[@]}"
fi
if (( nixl_missing )); then
  make_venv "$NIXL_VENV" "${NIXL_PINS[@]}"
fi
if (( vllm_missing )); then
  make_venv "$VLLM_VENV" "${VLLM_PINS[@]}"
fi
echo "install-deps.sh: done"
