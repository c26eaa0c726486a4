#!/usr/bin/env bash
# Builds and runs fused_step.cu on the GPU machine (nvcc and cuBLAS there), linked with the
# library's step kernels (kernels/rnn.cu): the bf16 clipped ReLU's forward walk as cuBLAS's GEMM
# plus the step kernel, against one kernel a step that streams U and applies the step.
#   bash scripts/dev/fused-step.sh [H...]     # default: 2816 4096 4608 5120 6144
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
bin="${DS2_DEV_TOOLS:-/tmp}/fused_step"
[[ -x "$bin" ]] || nvcc -O3 -std=c++17 -arch=sm_90 -I"$root" -I"$root/src" -o "$bin" \
  "$here/fused_step.cu" "$root/kernels/rnn.cu" -lcublas
"$bin" "$@"
