#!/usr/bin/env bash
# Builds and runs gemm_batch_pad.cu on the GPU machine (nvcc and cuBLAS there): the GEMM
# recurrence's product at N batch rows against N padded (nn/cuda/gemm_recurrence.h).
#   bash scripts/dev/gemm-batch-pad.sh [relu|gru] [bf16|fp32] [dense H...]  # default: relu bf16
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nvcc -O2 -arch=sm_90 -o /tmp/gemm_batch_pad "$here/gemm_batch_pad.cu" -lcublas
/tmp/gemm_batch_pad "${1:-relu}" "${2:-bf16}" "${@:3}"
