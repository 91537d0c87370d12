#!/usr/bin/env bash
# ./build.sh fuzz SECONDS: builds the harnesses in build-fuzz/ (clang, libFuzzer, ASan+UBSan, no CUDA,
# no MPI, nothing but the readers) and runs each for SECONDS, one after another on one core, starting
# from its seed corpus in tests/fuzz/corpus/. New inputs go to build-fuzz/corpus/, crashes to
# build-fuzz/artifacts/; it fails if any harness crashed. docs/debugging.md says what to do with one.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="$1"
harnesses=(safetensors config_file checkpoint_state optimizer_keys token_shard llmc_model gpt2_tokenizer state_shards)

if [ ! -f build-fuzz/build.ninja ]; then
  CXX="${FUZZ_CXX:-clang++}" meson setup build-fuzz -Dfuzz=true -Dbuildtype=debugoptimized \
    -Dcuda=disabled -Dmpi=disabled -Dnccl=disabled -Dexamples=false -Dtests=false -Dbenchmarks=false
fi
ninja -C build-fuzz

failed=()
for h in "${harnesses[@]}"; do
  mkdir -p "build-fuzz/corpus/$h" build-fuzz/artifacts build-fuzz/logs
  log="build-fuzz/logs/$h.log"
  echo "fuzz: $h for ${seconds}s (log: $log)"
  # The first directory takes the new inputs; the committed seeds are only read.
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 OMP_NUM_THREADS=1 \
      "build-fuzz/tests/fuzz/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$h-" \
      "build-fuzz/corpus/$h" "tests/fuzz/corpus/$h" >"$log" 2>&1; then
    echo "fuzz: $h: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') execs, no crash"
  else
    echo "fuzz: $h CRASHED; the input is in build-fuzz/artifacts/$h-*; the end of $log:"
    tail -n 40 "$log"
    failed+=("$h")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in ${failed[*]}" >&2
  exit 1
fi
