#!/usr/bin/env bash
# Packs this machine's build (build/ds2 and build/ds2_tests: sm_90, the same CUDA 13 toolkit as the
# device machine) into .devdeps/bin-local/ for a device call that carries .devdeps, instead of
# building there (~150-230 s of the session's device time). The device has every shared library the
# binaries load except libsndfile (unpack-debs.sh brings it) and yaml-cpp's, which goes along here.
#   bash scripts/dev/pack-local-bins.sh            # here, after building build/
# then on the device, in the call's command:
#   source .devdeps/unpack-debs.sh; source .devdeps/bin-local/use.sh   # /tmp/ds2, /tmp/ds2_tests
set -euo pipefail
out=.devdeps/bin-local
[ -x build/ds2 ] && [ -x build/ds2_tests ] || { echo "build/ds2 and build/ds2_tests first" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
# One archive with a dictionary larger than both binaries: ds2_tests repeats most of ds2 (the
# library and its kernels), which xz then stores once (35 MB as two files, 19 MB as one).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for b in ds2 ds2_tests; do strip -o "$tmp/$b" "build/$b"; done
tar -C "$tmp" -cf - ds2 ds2_tests | xz -T1 --lzma2=preset=9e,dict=256MiB >"$out/bins.tar.xz"
yaml="$(ldd build/ds2 | awk '/libyaml-cpp/ {print $3}')"
[ -n "$yaml" ] && cp -L "$yaml" "$out/"
cat >"$out/use.sh" <<'USE'
# Sourced on the device machine: unpacks the carried binaries into /tmp and puts yaml-cpp on the path.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LD_LIBRARY_PATH="$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
xz -dc "$here/bins.tar.xz" | tar -C /tmp -xf - && chmod +x /tmp/ds2 /tmp/ds2_tests
if ldd /tmp/ds2_tests | grep -q 'not found'; then ldd /tmp/ds2_tests | grep 'not found'; fi
USE
du -sh "$out"
echo "carry .devdeps (64 MiB in all; move .devdeps/bin-old aside if it is there)"
