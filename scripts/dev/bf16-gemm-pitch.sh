#!/usr/bin/env bash
# Builds and runs bf16_gemm_pitch.cu on the GPU machine (nvcc and cuBLAS there).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nvcc -O2 -arch=sm_90 -o /tmp/bf16_gemm_pitch "$here/bf16_gemm_pitch.cu" -lcublas
/tmp/bf16_gemm_pitch
