#!/usr/bin/env bash
# Copies what scripts/make-english-corpus.sh runs (espeak-ng, sox and flac with every shared
# library they load except the C library's own, espeak-ng's voice data, and the fortune files)
# into one folder, for a machine that cannot install packages, such as a GPU machine without a
# package registry. The corpus it builds there is byte for byte the one the packages build here
# (same versions). Needs the packages here (scripts/install-deps.sh) and the same architecture and
# a C library at least as new there.
#
#   scripts/bundle-corpus-tools.sh .devdeps/corpus-tools          # ~30 MB
#   # on the other machine, from the project root:
#   source .devdeps/corpus-tools/env.sh
#   scripts/make-english-corpus.sh large --fortunes "$CORPUS_TOOLS/fortunes" --jobs 16
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
OUT="$1"
for tool in espeak-ng sox flac; do
  command -v "$tool" >/dev/null ||
    { echo "bundle-corpus-tools: no $tool (scripts/install-deps.sh)" >&2; exit 1; }
done
FORTUNES=/usr/share/games/fortunes
[ -e "$FORTUNES/fortunes" ] && [ -e "$FORTUNES/people" ] ||
  { echo "bundle-corpus-tools: no fortune files in $FORTUNES (install-deps.sh)" >&2; exit 1; }
DATA=$(espeak-ng --version | sed -n 's/.*Data at: *//p')
[ -d "$DATA" ] || { echo "bundle-corpus-tools: cannot find espeak-ng's data folder" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/real" "$OUT/lib" "$OUT/share" "$OUT/fortunes"
for tool in espeak-ng sox flac; do
  cp "$(command -v "$tool")" "$OUT/real/"
  # A wrapper puts the bundled libraries first for the tool alone (not for python3 and the rest).
  cat >"$OUT/bin/$tool" <<WRAP
#!/bin/sh
here=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH="\$here/lib" exec "\$here/real/$tool" "\$@"
WRAP
  chmod +x "$OUT/bin/$tool"
done
# Every library the tools load, but the C library's (the loader, libc, libm, ...), which must
# come from the machine itself.
for tool in "$OUT"/real/*; do ldd "$tool" | awk '$3 ~ /^\// {print $3}'; done | sort -u |
  grep -v -E '/(ld-linux[^/]*|libc|libm|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$OUT/lib/"; done
cp -r "$DATA" "$OUT/share/"
cp -r "$FORTUNES"/. "$OUT/fortunes/"
cat >"$OUT/env.sh" <<'ENV'
# Source this to run the bundled espeak-ng, sox and flac (scripts/bundle-corpus-tools.sh).
CORPUS_TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CORPUS_TOOLS
export PATH="$CORPUS_TOOLS/bin:$PATH"
export ESPEAK_DATA_PATH="$CORPUS_TOOLS/share"
ENV
echo "bundle-corpus-tools: $(du -sh "$OUT" | cut -f1) in $OUT ($(ls "$OUT/lib" | wc -l) libraries)"
