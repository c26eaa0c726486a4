#!/usr/bin/env bash
# Builds and runs gemm_algos.cu on the GPU machine (nvcc, cuBLAS and cuBLASLt there).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nvcc -O2 -arch=sm_90 -o /tmp/gemm_algos "$here/gemm_algos.cu" -lcublasLt -lcublas
/tmp/gemm_algos
