#!/usr/bin/env bash
# Configures and builds ds2 into build/ (Release). Extra arguments go to cmake's configure step;
# DS2_TARGET=ds2 builds only the binary.
# Used by demo.sh and test.sh; installs the Debian dependencies first when any is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
BUILD_DIR="${DS2_BUILD_DIR:-$ROOT/build}"
JOBS="${DS2_JOBS:-$(nproc)}"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@" >"$BUILD_DIR.configure.log" 2>&1 || {
  cat "$BUILD_DIR.configure.log"
  echo "build.sh: cmake configure failed (log above)" >&2
  exit 1
}
grep -A12 "ds2 configuration summary" "$BUILD_DIR.configure.log" | sed 's/^-- //'
cmake --build "$BUILD_DIR" -j"$JOBS" ${DS2_TARGET:+--target "$DS2_TARGET"}
