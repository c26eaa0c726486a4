#!/usr/bin/env bash
# On a GPU machine (see ../shared/device/README.md; .devdeps/ carried with the tree): builds ds2
# and its tests into build-gpu/, runs the persistent GRU's tests and `ds2 bench rnn --cell gru`
# at several sizes. Full logs go to $OUT (default /tmp/gru-out); the summary to stdout.
#   bash scripts/dev/gru-device.sh [gtest filter] [quick]
set -uo pipefail
OUT="${OUT:-/tmp/gru-out}"
FILTER="${1:-PersistentGru*:CudaRnnLayer*}"
mkdir -p "$OUT"
# The build and the tests: device-build.sh's (build.log and tests.log in $OUT).
OUT="$OUT" bash scripts/dev/device-build.sh "$FILTER" --no-pack || exit 1
grep -E 'largest persistent GRU' "$OUT/tests.log" | head -5
[ "${2:-}" = quick ] && exit 0
for hb in "512 4" "1024 4" "1536 4" "2048 4" "1024 1" "1024 8" "1024 32" "2048 1"; do
  set -- $hb
  build-gpu/ds2 bench rnn --cell gru --hidden "$1" --batch "$2" --steps 256 >"$OUT/bench-h$1-b$2.log" 2>&1
  echo "== H $1 B $2"
  grep -E '^(plan|largest|ours|cuDNN)' "$OUT/bench-h$1-b$2.log" | cut -c1-150
done
