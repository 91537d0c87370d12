#!/usr/bin/env bash
# kernels/ is the lowest floor: every quoted include in it names another kernels/ header, so nothing in
# kernels/ can reach tensor/, autograd/, collective/, nn/, optim/, runtime/ or any folder above.
# Usage: check_includes.sh <source root>. Prints each offending line and exits 1 if there is one.
set -euo pipefail
root="$1"
[ -d "$root/kernels" ] || { echo "no kernels/ under $root"; exit 1; }
bad="$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("|<accel/)' "$root/kernels" \
  | grep -vE '#[[:space:]]*include[[:space:]]*"kernels/' || true)"
if [ -n "$bad" ]; then
  echo "kernels/ includes headers from outside kernels/ (it may only include kernels/ and system headers):"
  echo "$bad"
  exit 1
fi
echo "kernels/: every include stays in kernels/ or is a system header"
