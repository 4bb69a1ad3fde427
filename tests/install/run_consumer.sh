#!/usr/bin/env bash
# Usage: run_consumer.sh BUILD STAGE PREFIX LIBDIR LANG HOW
# Builds the consumer project consumers/LANG (c or cpp) outside the source
# and build trees against the staged install STAGE/PREFIX (libraries in
# PREFIX/LIBDIR), HOW being cmake
# (find_package(mcdma CONFIG)) or pkg-config (its Makefile), then runs it
# against a real mcdma-rpcd (BUILD's) and checks it ran on the staged
# libmcdma, not on the build tree's.
set -euo pipefail
build=$1 stage=$2 prefix=$3 libdir=$4 lang=$5 how=$6
here=$(cd "$(dirname "$0")" && pwd)
src=$here/consumers/$lang
root=$stage$prefix
[[ -d $root ]] || { echo "run_consumer.sh: no staged install at $root" >&2; exit 1; }
work=$(mktemp -d /tmp/mcdma-consumer.XXXXXX)
trap 'rm -rf "$work"' EXIT
case "$how" in
  cmake)
    cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$root" -DCMAKE_BUILD_TYPE=Release \
      -G Ninja >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
    cmake --build "$work/build" || exit 1
    program=$work/build/consumer_$lang
    ;;
  pkg-config)
    export PKG_CONFIG_PATH=$root/$libdir/pkgconfig
    pkg-config --exists mcdma || { echo "run_consumer.sh: pkg-config finds no mcdma in $PKG_CONFIG_PATH" >&2; exit 1; }
    echo "pkg-config mcdma $(pkg-config --modversion mcdma): $(pkg-config --cflags --libs mcdma)"
    mkdir -p "$work/build"
    make -s -C "$work/build" -f "$src/Makefile" VPATH="$src" || exit 1
    program=$work/build/consumer_$lang
    # What a system's loader path does for a library in /usr/lib.
    export LD_LIBRARY_PATH=$root/$libdir
    ;;
  *) echo "run_consumer.sh: HOW is cmake or pkg-config, not $how" >&2; exit 2 ;;
esac
lib=$(ldd "$program" | awk '$1 == "libmcdma.so.1" { print $3 }')
case "$lib" in
  "$root/$libdir"/*) echo "$program runs on $lib" ;;
  *) echo "run_consumer.sh: $program loads libmcdma.so.1 from '${lib:-nowhere}', not from $root/$libdir" >&2; exit 1 ;;
esac
exec "$here/../run_with_daemon.sh" "$build/daemon/mcdma-rpcd" "$program"
