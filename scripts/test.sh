#!/usr/bin/env bash
# Builds ds2 and runs the whole test suite with ctest. GPU tests skip, saying why, where there is
# no GPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh" -DDS2_BUILD_TESTS=ON
cd "${DS2_BUILD_DIR:-$ROOT/build}"
ctest --output-on-failure -j"$(nproc)" "$@"
