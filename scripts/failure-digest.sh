#!/usr/bin/env bash
# After a failed `ctest`, prints what failed in a few lines per test: the
# lines of each failed test's output that name a failure (gtest's Failure
# and FAILED lines with the expectation under them, a harness's FAIL
# lines, the VM's verdict), so the end of a long log says what went wrong.
#   failure-digest.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: failure-digest.sh BUILD_DIR}
log=$build/Testing/Temporary/LastTest.log
failed=$build/Testing/Temporary/LastTestsFailed.log
[ -f "$log" ] && [ -f "$failed" ] || exit 0
echo "==== failure digest (full output above and in $log)"
while IFS= read -r entry; do
  name=${entry#*:}
  echo "== $name"
  awk -v name="$name" '
    / Testing: / { sub(/^[0-9]+\/[0-9]+ Testing: /, ""); inside = ($0 == name); next }
    !inside { next }
    /: Failure$/ { show = 6 }
    /^== |\[  FAILED  \]|^FAIL |vm\.sh: .*(verdict|timed out|FAIL)|Timeout|Exception|Segmentation/ { show = show > 1 ? show : 1 }
    # Sanitizers and fuzzers (scripts/sanitize.sh, scripts/fuzz.sh): the
    # report heading and the first frames under it.
    /(ERROR|WARNING): (Address|Leak|Thread|UndefinedBehavior)Sanitizer|runtime error:|^SUMMARY: / { show = show > 4 ? show : 4 }
    # The list of failed tests of a nested ctest (the sanitized suites).
    /The following tests FAILED|^[ \t]+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Child aborted)\)/ { show = show > 1 ? show : 1 }
    /(fuzz|sanitize)\.sh: .*(FAIL|report|finding)|Test unit written|deadly signal|ERROR: libFuzzer/ { show = show > 1 ? show : 1 }
    show > 0 { print "  " $0; show--; if (++printed >= 60) exit }
  ' "$log"
done < "$failed"
