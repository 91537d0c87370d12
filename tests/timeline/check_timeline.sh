#!/bin/sh
# The timeline of a 2-rank mlp_classifier run under `accel launch --trace DIR`: every rank writes its
# file, the launcher merges them, draws a step and prints the straggler summary naming the slowest
# rank; the merged trace parses, its spans nest, and a gradient all-reduce overlaps backward.
# `accel trace merge` run by hand gives the same file. Usage: check_timeline.sh ACCEL_CLI MLP_CLASSIFIER CHECKER
set -u
accel=$1
example=$2
checker=$3
export ACCEL_CONFIG_FILE=/nonexistent/accel-tests.yaml OMP_NUM_THREADS=1
dir=$(mktemp -d "${TMPDIR:-/tmp}/accel-timeline-XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
ok() { echo "   ok: $1"; }
failed() { echo "   FAILED: $1"; failures=$((failures + 1)); }
expect() {  # a message, then an extended regular expression the launcher's output must match
  if printf '%s\n' "$out" | grep -aEq "$2"; then ok "$1"; else failed "$1 (no match for: $2)"; fi
}

out=$("$accel" launch -n 2 --trace "$dir" "$example" --epochs 2 --batch-size 64 2>&1)
status=$?
printf '%s\n' "$out" | grep -aE "^accel|^straggler|^ +rank|^ +[01] |^slowest|^picture|^note" | sed 's/^/   /'
[ "$status" -eq 0 ] && ok "the run succeeded" || failed "the run exited with $status"
for r in 0 1; do [ -s "$dir/accel_trace_rank$r.json" ] && ok "rank $r wrote its file" || failed "no file from rank $r"; done
expect "the settings line names the trace directory" "trace=$dir \(environment ACCEL_TRACE\)"
expect "the launcher merged the files" "accel trace merge: 2 rank\(s\) from $dir -> $dir/trace.json"
expect "the straggler summary lists both ranks" "^ +1 +[^ ]+ +[0-9]+ +[0-9.]+"
expect "and names the slowest" "^slowest: rank [01] \(.*\), [0-9.]+ ms median, [0-9]+ % above the fastest, rank [01]"
grep -q "rank 1 main" "$dir/step.svg" && ok "the picture draws rank 1's main thread" || failed "step.svg lacks rank 1"
"$checker" "$dir/trace.json" 2 || failures=$((failures + 1))

rm "$dir/trace.json"
merged=$("$accel" trace merge "$dir" "$dir/again.json" 2>&1) && ok "accel trace merge by hand succeeded" ||
  failed "accel trace merge failed: $merged"
"$checker" "$dir/again.json" 2 >/dev/null && ok "its output passes the same checks" || failed "the hand merge differs"
rm "$dir/accel_trace_rank1.json"
merged=$("$accel" trace merge "$dir" "$dir/one.json" 2>&1)
printf '%s\n' "$merged" | grep -q "note: rank 1 left no timeline file" && ok "a missing rank is named" ||
  failed "no note about the missing rank: $merged"

[ "$failures" -eq 0 ] && echo "PASS" || echo "FAIL: $failures check(s)"
[ "$failures" -eq 0 ]
