#!/usr/bin/env bash
# Builds and runs step_pdl.cu on the GPU machine (nvcc and cuBLAS there): the GEMM recurrence's
# step kernel after its GEMM, launched plainly or as a programmatic dependent launch.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nvcc -O2 -arch=sm_90 -o /tmp/step_pdl "$here/step_pdl.cu" -lcublas
/tmp/step_pdl
