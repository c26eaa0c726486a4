#!/usr/bin/env bash
# Builds and runs l2_window.cu on the GPU machine (nvcc and cuBLAS there), linked with the
# library's step kernels (kernels/rnn.cu): the bf16 clipped ReLU's GEMM recurrence walked over T
# steps at large H, with and without a persisting L2 access-policy window over U.
#   bash scripts/dev/l2-window.sh [H...]     # default: 4096 4608 5120 6144
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
bin="${DS2_DEV_TOOLS:-/tmp}/l2_window"
[[ -x "$bin" ]] || nvcc -O3 -std=c++17 -arch=sm_90 -I"$root" -I"$root/src" -o "$bin" \
  "$here/l2_window.cu" "$root/kernels/rnn.cu" -lcublas
"$bin" "$@"
