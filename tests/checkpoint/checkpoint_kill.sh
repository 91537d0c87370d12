#!/bin/sh
# A save killed with SIGKILL at each of its stages, and then at each stage again with a torn
# checkpoint of the earlier kills lying around, always leaves a loadable latest checkpoint: the last
# complete one (checksum unchanged), or the new one if the kill came after its commit.
# Usage: checkpoint_kill.sh PROGRAM
set -u
program=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "FAILED: $*"
  exit 1
}

first=$("$program" first "$dir") || fail "the first save: $first"
# The stages, from a save in a directory of its own.
"$program" first "$dir/stages-run" >/dev/null || fail "the stages run's first save"
stages=$("$program" stages "$dir/stages-run") || fail "listing the stages: $stages"
count=$(printf '%s\n' "$stages" | grep -c .)
[ "$count" -ge 10 ] || fail "a save went through only $count stages: $stages"
echo "a save goes through $count stages"
kills=0
for round in 1 2; do
  k=1
  while [ "$k" -le "$count" ]; do
    stage=$(printf '%s\n' "$stages" | sed -n "${k}p")
    "$program" kill "$k" "$dir" >/dev/null 2>&1
    status=$?
    [ "$status" = 137 ] || fail "the save to be killed at stage $k ($stage) exited with $status, not by SIGKILL"
    kills=$((kills + 1))
    latest=$("$program" check "$dir") || fail "after a kill at stage $k ($stage), latest does not load: $latest"
    name=${latest%% *}
    sum=${latest#* }
    if [ "$name" = checkpoint_0 ]; then
      [ "$sum" = "$first" ] || fail "after a kill at stage $k ($stage), checkpoint_0 changed: $sum, was $first"
    else
      # Killed after the commit: the new checkpoint is complete; the next round saves on top of it.
      first=$sum
      case "$stage" in "renamed into place"|"parent synced"|"committed") ;;
        *) fail "after a kill at stage $k ($stage), latest is $name, which was not committed yet" ;;
      esac
      # Later kills must keep this one: it is now the previous checkpoint.
      rm -rf "$dir/checkpoints/checkpoint_0"
      mv "$dir/checkpoints/$name" "$dir/checkpoints/checkpoint_0"
    fi
    k=$((k + 1))
  done
done
echo "PASS: $kills saves killed at $count stages, twice over; latest always loaded the last complete checkpoint"
