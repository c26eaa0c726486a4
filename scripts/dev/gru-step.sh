#!/usr/bin/env bash
# Builds and runs gru_step.cu on the GPU machine (nvcc and cuBLAS there), linked with the library's
# step kernels (kernels/rnn.cu): the bf16 GRU GEMM recurrence's step, GEMM and step kernel apart
# and chained.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
nvcc -O3 -std=c++17 -arch=sm_90 -I"$root" -I"$root/src" -o /tmp/gru_step "$here/gru_step.cu" \
  "$root/kernels/rnn.cu" -lcublas
/tmp/gru_step
