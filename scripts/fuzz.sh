#!/usr/bin/env bash
# Builds and runs the fuzzers (fuzz/, docs/fuzzing.md).
#
#   scripts/fuzz.sh list               the targets, one a line
#   scripts/fuzz.sh build              configure build-asan/, build the fuzzers only
#   scripts/fuzz.sh TARGET SECONDS     fuzz TARGET for SECONDS
#   scripts/fuzz.sh all SECONDS [JOBS] fuzz every target for SECONDS each,
#                                      JOBS at a time (default 1; one core each)
#
# build-asan/ is the ASan+UBSan tree of scripts/sanitize.sh (clang,
# MCDMA_FUZZ=ON: coverage counters and sanitizers on every target), of which
# this builds only the fuzzers and what they link (target fuzz_all); -j from
# MCDMA_BUILD_JOBS (default 2). A run starts from a scratch copy of
# fuzz/corpus/TARGET (build-asan/runs/TARGET/corpus, kept for a look
# afterwards), or, with MCDMA_FUZZ_CORPUS=DIR, from DIR/TARGET (seeded from
# fuzz/corpus/TARGET when new) which keeps what each run finds, for long
# campaigns of many runs. It prints the executions and coverage at the end,
# and exits 1 on a crash, leak or timeout, leaving the input under
# build-asan/crashes/TARGET/.
# Exit codes: 0 no finding, 1 a finding or a failure, 2 usage.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build-asan
targets=(submit tcp_frames link_wire verbs_wire peer options fabric_key kv_manifest)

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

die() {
  echo "fuzz.sh: $*" >&2
  exit 1
}

# clang and libFuzzer are dependencies (install-deps.sh installs them): a
# missing one is a failure, never a skip.
check_toolchain() {
  command -v clang >/dev/null && command -v clang++ >/dev/null ||
    die "clang/clang++ not found (Debian: apt-get install clang; or run scripts/install-deps.sh)"
  local lib
  lib="$(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
  [[ -f "$lib" ]] ||
    die "libFuzzer not found at $lib (Debian: apt-get install libclang-rt-14-dev; or run scripts/install-deps.sh)"
}

build_fuzzers() {
  check_toolchain
  "$root/scripts/sanitize.sh" build address fuzz_all
}

# The last status line and the final stats of a libFuzzer log.
summarize() {
  local target=$1 log=$2 corpus=$3
  local done_line execs rate
  done_line=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  echo "fuzz.sh: $target: executions ${execs:-?}, exec/s ${rate:-?}," \
       "$(grep -oE 'cov: [0-9]+ ft: [0-9]+' <<<"$done_line" | tail -1 || echo 'cov: ?')," \
       "corpus $(find "$corpus" -type f | wc -l) files"
}

run_target() {
  local target=$1 seconds=$2
  [[ " ${targets[*]} " == *" $target "* ]] || { echo "fuzz.sh: unknown target: $target" >&2; exit 2; }
  [[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a number" >&2; exit 2; }
  local work=$build/runs/$target crashes=$build/crashes/$target corpus
  rm -rf "$work"
  mkdir -p "$work" "$crashes"
  if [[ -n "${MCDMA_FUZZ_CORPUS:-}" ]]; then
    corpus=$MCDMA_FUZZ_CORPUS/$target
  else
    corpus=$work/corpus
  fi
  if [[ ! -d "$corpus" ]]; then
    mkdir -p "$corpus"
    if [[ -d "$root/fuzz/corpus/$target" ]]; then
      cp "$root/fuzz/corpus/$target/"* "$corpus/" 2>/dev/null || true
    fi
  fi
  local args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=20 -rss_limit_mb=4096
              -max_len=8192 -artifact_prefix="$crashes/")
  [[ -f "$root/fuzz/dict/$target.dict" ]] && args+=(-dict="$root/fuzz/dict/$target.dict")
  local cmd
  [[ -n "${MCDMA_FUZZ_BUILT:-}" ]] || build_fuzzers
  cmd=("$build/fuzz/fuzz_$target")
  local log=$work/log rc=0
  echo "fuzz.sh: $target for ${seconds}s (log: $log)"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
    LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/fuzz/lsan.supp} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    nice -n 10 "${cmd[@]}" "${args[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  summarize "$target" "$log" "$corpus"
  if (( rc != 0 )); then
    grep -E 'ERROR: |SUMMARY: |Uncaught Python exception|Test unit written' "$log" | head -20 >&2 || true
    echo "fuzz.sh: $target: FAILED (exit $rc); inputs in $crashes/, log $log" >&2
    return 1
  fi
}

case "${1:-}" in
  list) printf '%s\n' "${targets[@]}" ;;
  build) build_fuzzers ;;
  all)
    (( $# == 2 || $# == 3 )) || { usage >&2; exit 2; }
    jobs=${3:-1}
    [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: JOBS must be a positive number" >&2; exit 2; }
    # Built once here, so that the runs below only read the tree.
    build_fuzzers
    export MCDMA_FUZZ_BUILT=1
    failed=()
    declare -A running=()  # pid -> target
    reap_one() {
      local pid
      wait -n -p pid "${!running[@]}" || failed+=("${running[$pid]}")
      unset "running[$pid]"
    }
    for t in "${targets[@]}"; do
      while (( ${#running[@]} >= jobs )); do reap_one; done
      # Each run's output as one block when it ends (runs overlap).
      (out=$(run_target "$t" "$2" 2>&1); rc=$?; echo "$out"; exit $rc) &
      running[$!]=$t
    done
    while (( ${#running[@]} > 0 )); do reap_one; done
    if (( ${#failed[@]} > 0 )); then
      echo "fuzz.sh: findings in: ${failed[*]}" >&2
      exit 1
    fi
    ;;
  -h|--help) usage ;;
  '') usage >&2; exit 2 ;;
  *)
    (( $# == 2 )) || { usage >&2; exit 2; }
    run_target "$1" "$2"
    ;;
esac
