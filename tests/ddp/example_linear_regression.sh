#!/bin/sh
# Runs examples/linear_regression in one process and on 4 ranks under `accel launch -n 4` (which
# runs mpirun, adding --oversubscribe and --allow-run-as-root where needed), and checks that the
# 4-rank run prints its lines once, that all ranks end with bitwise-identical weights, and that
# those are within 1e-5 of the one-process weights.
# Usage: example_linear_regression.sh ACCEL EXAMPLE
set -eu
accel=$1
example=$2

single=$("$example" --print-weights)
echo "\$ $accel launch --dry-run -n 4 $example --print-weights"
"$accel" launch --dry-run -n 4 "$example" --print-weights
multi=$("$accel" launch -n 4 "$example" --print-weights 2>&1)
printf '%s\n--- 4 ranks ---\n%s\n' "$single" "$multi"

fail() {
  echo "FAILED: $*"
  exit 1
}

count() { printf '%s\n' "$2" | grep -c "$1" || true; }

# The main process alone prints the settings, the epoch lines and the final line.
[ "$(count '^accel: 4 process' "$multi")" = 1 ] || fail "the settings line is not printed exactly once"
[ "$(count '^final:' "$multi")" = 1 ] || fail "the final line is not printed exactly once"
[ "$(count '^epoch' "$multi")" = "$(count '^epoch' "$single")" ] || fail "the epoch lines are not printed once each"

# Every rank prints "weights of rank R: <hex w> <hex b> (<w> <b>)".
[ "$(count '^weights of rank' "$multi")" = 4 ] || fail "expected one weights line from each of the 4 ranks"
for r in 0 1 2 3; do
  [ "$(count "^weights of rank $r:" "$multi")" = 1 ] || fail "rank $r did not print its weights once"
done
exact=$(printf '%s\n' "$multi" | sed -n 's/^weights of rank [0-9]*: \([^ ]* [^ ]*\) .*/\1/p' | sort -u)
[ "$(printf '%s\n' "$exact" | wc -l)" = 1 ] || fail "the ranks' weights differ: $exact"

# Within 1e-5 of the one-process run.
one=$(printf '%s\n' "$single" | sed -n 's/^weights of rank 0: .* (\(.*\))$/\1/p')
four=$(printf '%s\n' "$multi" | sed -n 's/^weights of rank 0: .* (\(.*\))$/\1/p')
[ -n "$one" ] && [ -n "$four" ] || fail "no weights line to compare"
echo "$one $four" | awk '{ dw = $1 - $3; db = $2 - $4; if (dw < 0) dw = -dw; if (db < 0) db = -db;
  if (dw > 1e-5 || db > 1e-5) { printf "FAILED: 4 ranks %s %s vs one process %s %s\n", $3, $4, $1, $2; exit 1 } }'
echo "linear_regression on 4 ranks: identical weights on every rank, within 1e-5 of one process"
