# Sourced by the amp check scripts: fail, and the values of a program's "final:" line.
fail() {
  echo "FAILED: $*"
  exit 1
}

# The value of key in the line that starts with "final:".
final() { printf '%s\n' "$1" | sed -n "s/^final:.* $2=\([^ ]*\).*/\1/p"; }
