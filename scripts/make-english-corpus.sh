#!/usr/bin/env bash
# Synthesizes the English corpus (espeak-ng voices reading the fortune collections; see
# scripts/make-english-corpus.py for how) and checks what it needs first. Installs nothing:
# scripts/install-deps.sh installs espeak-ng, sox, flac, fortunes and fortunes-min.
#
#   scripts/make-english-corpus.sh small                   # -> data/english/small (~1 h of train audio)
#   scripts/make-english-corpus.sh large                   # -> data/english/large (~30 h)
#   scripts/make-english-corpus.sh tiny /tmp/e --seed 2    # a few dozen utterances, for tests
#
# Further arguments go to the Python script (--seed N, --jobs N, --fortunes DIR). The same seed
# and size give the same bytes. configs/english-small.yaml trains on data/english/large.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  echo "usage: $0 tiny|small|large [OUT_DIR] [--seed N] [--jobs N]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
SIZE="$1"
shift
case "$SIZE" in tiny | small | large) ;; *) usage ;; esac
OUT="$ROOT/data/english/$SIZE"
if [ $# -ge 1 ] && [ "${1#-}" = "$1" ]; then
  OUT="$1"
  shift
fi

missing=()
for tool in espeak-ng sox flac python3; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
# --fortunes DIR (passed on to the Python script) reads the collections from another folder
fortunes=/usr/share/games/fortunes
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  [ "${args[i]}" = "--fortunes" ] && fortunes="${args[i + 1]}"
done
[ -e "$fortunes/fortunes" ] || missing+=("fortunes (package fortunes-min)")
[ -e "$fortunes/people" ] || missing+=("fortunes (package fortunes)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "make-english-corpus.sh: missing ${missing[*]}; run scripts/install-deps.sh" >&2
  exit 1
fi

start=$(date +%s)
python3 "$ROOT/scripts/make-english-corpus.py" --size "$SIZE" --out "$OUT" "$@"
echo "make-english-corpus.sh: $SIZE corpus in $OUT ($(($(date +%s) - start)) s)"
