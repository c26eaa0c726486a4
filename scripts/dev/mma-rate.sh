#!/bin/bash
# Builds and runs scripts/dev/mma_rate.cu on this machine's GPU (Hopper: sm_90a; see its header).
#   scripts/dev/mma-rate.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$nvcc" -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o "$out/mma_rate" "$here/mma_rate.cu"
"$out/mma_rate"
