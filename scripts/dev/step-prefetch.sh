#!/usr/bin/env bash
# Builds and runs step_prefetch.cu on the GPU machine (nvcc and cuBLAS there), linked with the
# library's step kernels (kernels/rnn.cu): the bf16 GEMM recurrence walked over T steps, with and
# without step kernels that prefetch the next step's inputs into L2. `gru`: the GRU's shapes only.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
nvcc -O3 -std=c++17 -arch=sm_90 -I"$root" -I"$root/src" -o /tmp/step_prefetch \
  "$here/step_prefetch.cu" "$root/kernels/rnn.cu" -lcublas
/tmp/step_prefetch "$@"
