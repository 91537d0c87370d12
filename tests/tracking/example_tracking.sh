#!/bin/sh
# The examples with trackers and the progress bar, as a user runs them:
# - mlp_classifier --log_with all writes the three trackers' files with loss and lr at every step;
# - char_gpt honours ACCEL_LOG_WITH (no flag);
# - `accel launch -n 2 --log_with jsonl mlp_classifier`: one JSONL file holding each step once (rank 1
#   writes nothing), the progress bar's last line printed once, and the settings lines on stderr only.
# Usage: example_tracking.sh ACCEL EXAMPLES_DIR
set -eu
accel=$1
examples=$2
export ACCEL_CONFIG_FILE=/nonexistent/accel-tests.yaml
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

fail() {
  echo "FAILED: $*"
  exit 1
}

# Checks DIR/metrics.jsonl: the config first, then records of steps 1..N once each with loss and lr,
# and a last record with the extra name $2. Prints N.
check_jsonl() {
  python3 - "$1/metrics.jsonl" "$2" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert "config" in lines[0], lines[0]
steps = [r["step"] for r in lines[1:-1]]
assert steps == list(range(1, len(steps) + 1)), steps
assert all(set(r["values"]) == {"loss", "lr"} for r in lines[1:-1])
assert sys.argv[2] in lines[-1]["values"], lines[-1]
print(len(steps))
PY
}

out=$("$examples/mlp_classifier" --epochs 2 --log_with all --logging_dir "$dir/one" 2>"$dir/err") ||
  fail "mlp_classifier --log_with all: $out $(cat "$dir/err")"
run="$dir/one/mlp_classifier"
steps=$(check_jsonl "$run" test_accuracy) || fail "mlp_classifier's metrics.jsonl"
[ "$steps" = 76 ] || fail "mlp_classifier logged $steps steps, expected 76 (2 epochs of 38)"
[ "$(head -1 "$run/metrics.csv")" = "step,loss,lr,test_accuracy,test_loss" ] || fail "csv header: $(head -1 "$run/metrics.csv")"
[ "$(wc -l < "$run/metrics.csv")" = 78 ] || fail "csv rows: $(wc -l < "$run/metrics.csv")"
ls "$run"/events.out.tfevents.* >/dev/null || fail "no TensorBoard events file in $run"
printf '%s\n' "$out" | grep -q '^train  76/76 100% ' || fail "no final progress line: $out"
printf '%s\n' "$out" | grep -q '^accel:' && fail "a settings line on stdout: $out"
grep -q '^accel: 1 process(es), .*, log_with=jsonl,csv,tensorboard (code)' "$dir/err" ||
  fail "the settings line (stderr) does not name the trackers: $(cat "$dir/err")"
echo "mlp_classifier --log_with all: jsonl, csv and events files, 76 steps"

out=$(ACCEL_LOG_WITH=csv "$examples/char_gpt" --steps 6 --sample-length 5 --layers 1 --embd 16 --heads 2 \
  --block-size 16 --logging_dir "$dir/gpt" 2>/dev/null) || fail "char_gpt with ACCEL_LOG_WITH=csv: $out"
[ "$(head -1 "$dir/gpt/char_gpt/metrics.csv")" = "step,loss,lr,held_out_loss" ] || fail "char_gpt csv header"
[ "$(wc -l < "$dir/gpt/char_gpt/metrics.csv")" = 8 ] || fail "char_gpt csv: $(cat "$dir/gpt/char_gpt/metrics.csv")"
echo "char_gpt with ACCEL_LOG_WITH=csv: 6 steps and the held-out loss"

out=$("$accel" launch -n 2 --log_with jsonl "$examples/mlp_classifier" --epochs 2 --logging_dir "$dir/two" \
  2>"$dir/err") || fail "accel launch -n 2 --log_with jsonl: $out $(cat "$dir/err")"
steps=$(check_jsonl "$dir/two/mlp_classifier" test_accuracy) || fail "2-rank metrics.jsonl"
[ "$steps" = 38 ] || fail "2 ranks logged $steps steps, expected 38 (2 epochs of 19)"
[ "$(printf '%s\n' "$out" | grep -c '^train  38/38 100% ')" = 1 ] || fail "the progress bar's last line is not printed once: $out"
[ "$(printf '%s\n' "$out" | grep -c '^final:')" = 1 ] || fail "the final line is not printed once: $out"
printf '%s\n' "$out" | grep -q '^accel:' && fail "a settings line on stdout: $out"
[ "$(grep -c '^accel: 2 process(es), .*, log_with=jsonl (environment ACCEL_LOG_WITH)' "$dir/err")" = 1 ] ||
  fail "the 2-rank settings line is not on stderr once: $(cat "$dir/err")"
echo "accel launch -n 2 --log_with jsonl: each step once, one progress line, settings on stderr"
echo PASS
