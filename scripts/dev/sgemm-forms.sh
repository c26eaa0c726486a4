#!/bin/bash
# Builds and runs scripts/dev/sgemm_forms.cpp (see its header) against the system OpenBLAS.
#   scripts/dev/sgemm-forms.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
inc=$(pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-pthread)
# shellcheck disable=SC2086  # inc is a list of flags
g++ -std=c++17 -O2 $inc -o "$out/sgemm_forms" "$here/sgemm_forms.cpp" -lopenblas
"$out/sgemm_forms"
