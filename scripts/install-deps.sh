#!/usr/bin/env bash
# Installs the Debian packages that the build, the tests and the demo need.
# Idempotent: when every package is already installed it does nothing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git python3
  libsndfile1-dev libfftw3-dev libyaml-cpp-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
  flac
  sctk  # NIST sclite: tests/cli/score_test.cpp checks ds2 score against it
  espeak-ng sox fortunes fortunes-min  # scripts/make-english-corpus.sh: voices, resampling, text
  # scripts/make-digit-voices.py (data/voices): synthesizers, their voices, recorded digits
  flite festival festvox-kdlpc16k festvox-us-slt-hts asterisk-core-sounds-en-wav
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
