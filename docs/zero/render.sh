#!/bin/sh
# Renders the ZeRO pictures (needs graphviz's dot: apt-get install graphviz). Run from anywhere.
set -eu
cd "$(dirname "$0")"
for f in *.dot; do dot -Tpng -Gdpi=110 "$f" -o "${f%.dot}.png"; done
