#!/usr/bin/env bash
# On a GPU machine (see ../shared/device/README.md; .devdeps/ with the Debian packages and
# unpack-debs.sh carried with the tree): builds ds2 and ds2_tests into build-gpu/, runs a gtest
# filter, and leaves the stripped binaries in $OUT as xz parts under 15 MiB, so that a later call
# on a fresh machine can carry them instead of building again (the device returns at most 8 files
# of 16 MiB from $OUT; one larger file, or a ninth, comes back as nothing).
#   bash scripts/dev/device-build.sh ['GTEST_FILTER'] [--no-pack]
# Later, with the parts copied into .devdeps/bin/:
#   cat .devdeps/bin/bins.tar.xz.part* | xz -dc | tar xf - -C build-gpu
set -uo pipefail
OUT="${OUT:-/tmp/device-out}"
FILTER="${1:-CudaDropout*:*PersistentRnn*:*Gru*:CudaRnn*}"
mkdir -p "$OUT"
# shellcheck disable=SC1091
source .devdeps/unpack-debs.sh >/dev/null 2>&1
JOBS="$(nproc)"
start=$(date +%s)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DDS2_BUILD_TESTS=ON >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
cmake --build build-gpu -j"$JOBS" --target ds2 ds2_tests >>"$OUT/build.log" 2>&1 || {
  grep -B2 -A12 -E 'error' "$OUT/build.log" | head -100
  exit 1
}
echo "build: $(($(date +%s) - start)) s on $JOBS cores"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
build-gpu/ds2_tests --gtest_filter="$FILTER" >"$OUT/tests.log" 2>&1
echo "tests ($FILTER): rc $?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure' "$OUT/tests.log" | head -40
[ "${2:-}" = --no-pack ] && exit 0
bins="$(mktemp -d)"
cp build-gpu/ds2 build-gpu/ds2_tests "$bins/" && strip "$bins"/ds2 "$bins"/ds2_tests
tar cf - -C "$bins" ds2 ds2_tests | xz -T"$JOBS" -6 | split -b 15M - "$OUT/bins.tar.xz.part"
ls -l "$OUT"/bins.tar.xz.part*
