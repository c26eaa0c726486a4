#!/usr/bin/env bash
# On a GPU machine (see ../shared/device/README.md; .devdeps/ carried with the tree): builds ds2
# and its tests into build-gpu/, runs the persistent GRU's tests and `ds2 bench rnn --cell gru`
# at several sizes. Full logs go to $OUT (default /tmp/gru-out); the summary to stdout.
#   bash scripts/dev/gru-device.sh [gtest filter] [quick]
set -uo pipefail
OUT="${OUT:-/tmp/gru-out}"
FILTER="${1:-PersistentGru*:CudaRnnLayer*}"
mkdir -p "$OUT"
# shellcheck disable=SC1091
source .devdeps/unpack-debs.sh
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DDS2_BUILD_TESTS=ON >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
start=$(date +%s)
cmake --build build-gpu -j16 --target ds2 ds2_tests >"$OUT/build.log" 2>&1 || {
  grep -B2 -A12 -E 'error' "$OUT/build.log" | head -100
  exit 1
}
echo "build: $(($(date +%s) - start)) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
build-gpu/ds2_tests --gtest_filter="$FILTER" >"$OUT/tests.log" 2>&1
echo "tests ($FILTER): rc $?"
grep -E '^\[  (PASSED|FAILED) |FAILED|largest persistent GRU|Failure' "$OUT/tests.log" | head -40
[ "${2:-}" = quick ] && exit 0
for hb in "512 4" "1024 4" "1536 4" "2048 4" "1024 1" "1024 8" "1024 32" "2048 1"; do
  set -- $hb
  build-gpu/ds2 bench rnn --cell gru --hidden "$1" --batch "$2" --steps 256 >"$OUT/bench-h$1-b$2.log" 2>&1
  echo "== H $1 B $2"
  grep -E '^(plan|largest|ours|cuDNN)' "$OUT/bench-h$1-b$2.log" | cut -c1-150
done
