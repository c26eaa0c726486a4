#!/bin/bash
# Builds and runs scripts/dev/exchange_latency.cu on this machine's GPU (see its header).
#   scripts/dev/exchange-latency.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$nvcc" -std=c++17 -O3 -arch=native -I"$here/../../src" -o "$out/exchange_latency" \
  "$here/exchange_latency.cu"
"$out/exchange_latency"
