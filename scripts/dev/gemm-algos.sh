#!/usr/bin/env bash
# Builds and runs gemm_algos.cu on the GPU machine (nvcc, cuBLAS and cuBLASLt there).
#   bash scripts/dev/gemm-algos.sh [bf16|fp32 relu|gru H B [H B ...]]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${DS2_DEV_TOOLS:-/tmp}/gemm_algos"
[[ -x "$bin" ]] || nvcc -O2 -arch=sm_90 -o "$bin" "$here/gemm_algos.cu" -lcublasLt -lcublas
"$bin" "$@"
