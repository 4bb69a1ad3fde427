#!/usr/bin/env bash
# A CUDA kernel writes mcdma buffers on host-a, the daemons move them to
# host-b as a KV hand-off, and a kernel on host-b checks every byte where
# they landed (mcdma-cuda-check; the hosts as in the demos: two network
# namespaces as root, else loopback). For a machine with an NVIDIA GPU and
# a build with the CUDA toolkit:
#
#   gpu/run-gpu-check.sh [BUILD] [--layers N] [--layer-bytes B]
#
# Exit codes: 0 every byte verified on the GPU and the CPU, 1 failure,
# 2 usage, 77 skipped (no CUDA device, or a build without CUDA), saying why.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
build=${1:-build}
[ $# -gt 0 ] && shift
layers=4
layer_bytes=$((64 << 20))
while [ $# -gt 0 ]; do
  case "$1" in
    --layers) layers=${2:?--layers needs a value}; shift 2 ;;
    --layer-bytes) layer_bytes=${2:?--layer-bytes needs a value}; shift 2 ;;
    *) echo "run-gpu-check.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [ ! -x "$build/daemon/mcdma-rpcd" ]; then echo "no mcdma-rpcd in build dir '$build'" >&2; exit 2; fi
build=$(cd "$build" && pwd)
check=$build/gpu/mcdma-cuda-check
if [ ! -x "$check" ]; then
  echo "SKIP: no $check (the build found no CUDA toolkit)"
  exit 77
fi
"$check" probe  # exits 77 with the reason when there is no device

source "$here/../demo/two-hosts-lib.sh"
two_hosts_init "$build"
two_hosts_start
id=cuda-check-$$

echo "== host-b: mcdma-cuda-check consume (waits for the hand-off)"
"${in_b[@]}" "$check" consume --socket "$dir/b.sock" --peer host-a --id "$id" \
  --timeout-ms 120000 > "$dir/b.log" 2>&1 &
pid_b=$!
pids+=("$pid_b")
echo "== host-a: mcdma-cuda-check produce ($layers layers of $layer_bytes bytes)"
"${in_a[@]}" "$check" produce --socket "$dir/a.sock" --id "$id" --layers "$layers" \
  --layer-bytes "$layer_bytes" --allow host-b --timeout-ms 120000 > "$dir/a.log" 2>&1 &
pid_a=$!
pids+=("$pid_a")
rc_a=0
rc_b=0
wait "$pid_b" || rc_b=$?
if [ "$rc_b" != 0 ]; then kill "$pid_a" 2>/dev/null || true; fi
wait "$pid_a" || rc_a=$?
echo "== host-a output"
sed 's/^/  /' "$dir/a.log"
echo "== host-b output"
sed 's/^/  /' "$dir/b.log"
echo "  exit status: produce $rc_a, consume $rc_b"
if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] && grep -q '^VERIFIED' "$dir/b.log"; then
  echo "PASS: a kernel's bytes crossed from host-a to host-b, checked by a kernel and the CPU"
  exit 0
fi
echo "FAIL"
exit 1
