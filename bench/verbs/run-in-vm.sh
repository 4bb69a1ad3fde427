#!/usr/bin/env bash
# Runs mcdma_bench_verbs inside the Soft-RoCE VM (tests/verbs/vm.sh) and
# brings its files back.
#
#   run-in-vm.sh BUILD_DIR [OUT_DIR] [-- BENCH_ARGS...]
#
# BUILD_DIR must hold bench/mcdma_bench_verbs, daemon/mcdma-rpcd and
# tools/mcdmactl/mcdmactl. OUT_DIR (default BUILD_DIR/bench/verbs-results)
# receives: console.log (everything the VM printed), report.txt (the
# tables), the raw-sample CSVs, summary.csv, logs/ (the daemons' and
# perftest's output, the guest's dmesg; the last lines of each) and
# host.txt (the host's load and any other qemu before and after the VM). Anything
# after `--` is passed to mcdma_bench_verbs (e.g. -- --iterations 200).
#
# The guest is an initramfs, so nothing it writes survives it: run.sh
# prints every result file to the console between marker lines
# (@@MCDMA-FILE-BEGIN <name> <lines> ... @@MCDMA-FILE-END <name>) and this
# script cuts them out of the console log, checking each line count.
#
# The VM's own timeout is $MCDMA_VM_TIMEOUT (vm.sh; 1500 s here unless
# set); the guest allows run.sh 1200 s. Exit codes: 0 the benchmark
# passed in the guest and every file came back, 1 otherwise, 2 usage, 77
# the VM cannot run here (vm.sh's reason).
set -euo pipefail
usage() { echo "usage: run-in-vm.sh BUILD_DIR [OUT_DIR] [-- BENCH_ARGS...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
build=$1
shift
out=$build/bench/verbs-results
if [ $# -ge 1 ] && [ "$1" != "--" ]; then out=$1; shift; fi
if [ $# -ge 1 ]; then [ "$1" = "--" ] || usage; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
vm=$here/../../tests/verbs/vm.sh

guest=$(mktemp -d /tmp/mcdma-vbench-guest.XXXXXX)
times_file=$(mktemp /tmp/mcdma-vbench-times.XXXXXX)
trap 'rm -rf "$guest" "$times_file"' EXIT
for bin in bench/mcdma_bench_verbs daemon/mcdma-rpcd tools/mcdmactl/mcdmactl; do
  [ -x "$build/$bin" ] || { echo "run-in-vm.sh: $build/$bin missing (build it first)" >&2; exit 1; }
  install -m 755 "$build/$bin" "$guest/"
done
# One argument per line, so no quoting survives the trip wrongly.
: > "$guest/bench-args"
for arg in "$@"; do printf '%s\n' "$arg" >> "$guest/bench-args"; done

cat > "$guest/run.sh" <<'GUEST'
#!/bin/bash
# In the guest: run the benchmark, then print its files to the console.
# Kernel messages on the console (rxe logs "Failed sending ACK" when the
# emulated link drops packets) could split the files' lines: keep them in
# dmesg only.
dmesg -n 1 2>/dev/null || echo 1 > /proc/sys/kernel/printk
cd /opt/host
out=/tmp/verbs-bench
mapfile -t args < bench-args
./mcdma_bench_verbs --out "$out" --daemon "$PWD/mcdma-rpcd" --mcdmactl "$PWD/mcdmactl" \
  "${args[@]}" 2>&1 | tee /tmp/report.txt
rc=${PIPESTATUS[0]}
mkdir -p "$out/logs"
cp /tmp/report.txt "$out/report.txt"
dmesg > "$out/logs/dmesg.log" 2>&1
emit() {  # name, file: the whole file, with a trailing newline
  echo "@@MCDMA-FILE-BEGIN $1 $(awk 'END{print NR}' "$2")"
  awk '{print}' "$2"
  echo "@@MCDMA-FILE-END $1"
}
for f in "$out"/*.csv "$out"/report.txt; do [ -f "$f" ] && emit "${f##*/}" "$f"; done
for f in "$out"/logs/*; do
  [ -f "$f" ] || continue
  tail -n 200 "$f" > /tmp/tail
  emit "logs/${f##*/}" /tmp/tail
done
echo "@@MCDMA-BENCH-EXIT $rc"
exit $rc
GUEST
chmod 755 "$guest/run.sh"

# The emulated figures move with the host's load: another VM or a build
# sharing the host's CPUs starves the guest's vCPUs. host.txt says how
# much CPU time the rest of the host used while the VM ran: all busy time
# (/proc/stat) minus this script's children's (the VM, reaped through
# vm.sh, so counted by `times`).
host_state() {
  echo "$1: load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, other qemu processes: $(pgrep -c qemu-system || true)"
}
busy_s() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2+$3+$4+$7+$8+$9)/hz}' /proc/stat; }
# `times` must run in this shell (not in $(...)) to see its children.
children_s() { awk 'NR==2{for(i=1;i<=2;i++){split($i,t,"m"); s+=t[1]*60+t[2]}} END{print s+0}' "$times_file"; }
mkdir -p "$out/logs"
host_state "host before the VM" > "$out/host.txt"
times > "$times_file"
t0=$(date +%s.%N) b0=$(busy_s) c0=$(children_s)
set +e
MCDMA_VM_TIMEOUT=${MCDMA_VM_TIMEOUT:-1500} bash "$vm" run "$guest" 2>&1 | tee "$out/console.log"
vm_rc=${PIPESTATUS[0]}
times > "$times_file"
t1=$(date +%s.%N) b1=$(busy_s) c1=$(children_s)
host_state "host after the VM" >> "$out/host.txt"
other=$(awk -v t="$t1-$t0" -v b="$b1-$b0" -v c="$c1-$c0" -v n="$(nproc)" 'BEGIN{
  split(t,x,"-"); split(b,y,"-"); split(c,z,"-"); wall=x[1]-x[2]; o=(y[1]-y[2])-(z[1]-z[2]);
  if (o < 0) o = 0; printf "%.0f", 100*o/(wall*n)}')
echo "rest of the host while the VM ran: ${other}% of its CPUs" >> "$out/host.txt"
cat "$out/host.txt" >&2
if [ "$other" -ge 10 ]; then
  echo "run-in-vm.sh: warning: other processes used ${other}% of the host's CPUs during the run; the emulated figures are skewed" >&2
fi

# Cut the files out of the console (CR LF from the serial line).
tr -d '\r' < "$out/console.log" | awk -v out="$out" '
  /^@@MCDMA-FILE-BEGIN / { name = $2; want = $3; got = 0; file = out "/" name; printf "" > file; next }
  /^@@MCDMA-FILE-END / {
    if (name != "") { close(file); if (got != want) { print "run-in-vm.sh: " name ": " got " of " want " lines came back" > "/dev/stderr"; bad = 1 } }
    name = ""; next
  }
  name != "" { print >> file; got++ }
  END { exit bad }'
cut_rc=$?
bench_rc=$(tr -d '\r' < "$out/console.log" | awk '/^@@MCDMA-BENCH-EXIT /{print $2}' | tail -1)
echo "run-in-vm.sh: vm.sh exit $vm_rc, benchmark exit ${bench_rc:-none}; files in $out" >&2
[ "$vm_rc" = 77 ] && exit 77
[ "$vm_rc" = 0 ] && [ "$cut_rc" = 0 ] && [ "${bench_rc:-1}" = 0 ] || exit 1
