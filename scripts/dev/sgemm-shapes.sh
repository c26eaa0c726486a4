#!/usr/bin/env bash
# Times a command's cblas_sgemm calls by shape (scripts/dev/sgemm_shapes.c) and prints the
# costliest shapes and the total:  bash scripts/dev/sgemm-shapes.sh -- build/ds2 bench step ...
# LD_PRELOAD survives ds2's rerun on wider OpenBLAS kernels (core/blas_kernels.h), so the shapes
# are those of the process that does the work.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "${1:-}" = "--" ] && shift
gcc -O2 -shared -fPIC -o /tmp/sgemm_shapes.so "$here/sgemm_shapes.c" -ldl
out=/tmp/sgemm-shapes.txt
SGEMM_SHAPES_OUT=$out LD_PRELOAD=/tmp/sgemm_shapes.so "$@" > /dev/null
sort -rn "$out" | head -15
awk '{s += $1} END {printf "total %.3f s of sgemm (summed over threads)\n", s}' "$out"
