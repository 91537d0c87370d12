#!/usr/bin/env bash
# Fails when libaccel exports a symbol of the tools: the accel executable's parts (runtime/cli: launch,
# rendezvous, config wizard, env report, self-test, the bench command), the `accel bench` code (bench/lib)
# or CLI11. An embedder links the training API only.
# Usage: check_exports.sh LIBACCEL [TOOL_STATIC_LIBRARY...]
set -euo pipefail
lib="$1"
shift

# The symbols libaccel offers a program that links it: the dynamic table of the shared library, or
# the external definitions of a static build.
case "$lib" in
  *.a) list=(nm --defined-only --extern-only) ;;
  *) list=(nm -D --defined-only) ;;
esac
mangled="$("${list[@]}" "$lib" | awk 'NF == 3 { print $3 }' | sort -u)"
[ -n "$mangled" ] || { echo "$lib: nm listed no exported symbols"; exit 1; }
exports="$(echo "$mangled" | c++filt)"
status=0

# 1. By name: the namespaces, types and functions of the tools. A function's name may carry an ABI tag
# before its arguments (accel::env_report[abi:cxx11]()).
functions='launch|mpirun_command|settings_environment|shell_join|split_arguments|exec_rank|machine_source'
functions+='|rendezvous_join|hostfile_text'                # rendezvous
functions+='|default_answers|ask_config'                   # config wizard
functions+='|env_report'                                   # env report
functions+='|run_self_test|check_collectives|check_training|check_accumulation'  # self-test
types='LaunchRequest|HostFacts|MachineSource|RendezvousSpec|RendezvousHost|MachineEntry|SelfTestResult|CheckList'
types+='|BenchCommand'
patterns=(
  'CLI::'
  'accel::bench::'
  "accel::($functions)(\\[abi:[[:alnum:]_]+\\])*\\("
  "accel::($types)\\b"
)
for pattern in "${patterns[@]}"; do
  found="$(echo "$exports" | grep -E "$pattern" || true)"
  if [ -n "$found" ]; then
    echo "libaccel exports tool symbols matching '$pattern':"
    echo "$found" | head -n 5 | sed 's/^/  /'
    status=1
  fi
done

# 2. By definition: no function or variable that a tool library defines itself (strong symbols; the
# weak ones are inline and template code from shared headers) may also be exported by libaccel.
for tool_lib in "$@"; do
  owned="$(nm --defined-only "$tool_lib" | awk 'NF == 3 && $2 ~ /^[TDBRGS]$/ { print $3 }' | sort -u)"
  both="$(comm -12 <(echo "$mangled") <(echo "$owned"))"
  if [ -n "$both" ]; then
    echo "libaccel exports symbols that $(basename "$tool_lib") defines:"
    echo "$both" | c++filt | head -n 5 | sed 's/^/  /'
    status=1
  fi
done

[ "$status" -eq 0 ] && echo "libaccel exports $(echo "$mangled" | wc -l) symbols, none of the tools'"
exit "$status"
