#!/usr/bin/env bash
# The whole job on the bundled data, on the CPU: build ds2, make the connected-digits corpus from
# the packed FSDD recordings in data/fsdd and the extra training voices in data/voices, validate
# it, train configs/fsdd.yaml for 6 epochs (about 3.5 minutes on 2 cores; the recipe's 16 take
# about 9.5; DS2_DEMO_EPOCHS=N sets it), evaluate on a speaker never heard in training
# (greedy, then beam search with the digits LM data/fsdd/digits-3gram.arpa as the config's decode:
# section says), self-train for one round on that speaker's other, untranscribed recordings
# (ds2 adapt, 2 epochs, about 1.5 minutes; the README's numbers use the default 2 rounds of 4) and evaluate again,
# and transcribe a few of the test recordings with the adapted model.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DS2="$ROOT/build/ds2"
CORPUS="$ROOT/data/fsdd/corpus"
RUN="${DS2_DEMO_RUN:-runs/fsdd-demo}"
EPOCHS="${DS2_DEMO_EPOCHS:-6}"

echo "== build"
BUILD_LOG="$(mktemp)"
if ! DS2_TARGET=ds2 scripts/build.sh >"$BUILD_LOG" 2>&1; then
  tail -40 "$BUILD_LOG"
  echo "demo.sh: the build failed (full log: $BUILD_LOG)" >&2
  exit 1
fi
grep -A10 "ds2 configuration summary" "$BUILD_LOG"
echo "== corpus (connected digits from data/fsdd; test speaker held out)"
# A corpus made before the extra voices (no "allison" in train) is made again.
if [ ! -f "$CORPUS/test.jsonl" ] || ! grep -q '"speaker": "allison"' "$CORPUS/train.jsonl"; then
  python3 scripts/make-fsdd-corpus.py --out "$CORPUS" --extra-data data/voices --extra-train 3000
else
  echo "using $CORPUS"
fi
echo "== validate-data"
"$DS2" validate-data configs/fsdd.yaml | tail -3
echo "== train configs/fsdd.yaml${EPOCHS:+ for $EPOCHS epochs}"
rm -rf "$RUN"
"$DS2" train configs/fsdd.yaml run.dir="$RUN" ${EPOCHS:+train.epochs=$EPOCHS} |
  grep -v "^conv\|^rnn\|^fc\|^total\|^$"
echo "== eval on the held-out speaker (greedy)"
"$DS2" eval "$RUN/best.ckpt" "$CORPUS/test.jsonl" --greedy
echo "== eval on the held-out speaker (beam search + LM, configs/fsdd.yaml decode:)"
"$DS2" eval "$RUN/best.ckpt" "$CORPUS/test.jsonl" --worst 0
echo "== self-training on the held-out speaker's other recordings (transcripts unused), then eval"
rm -rf "$RUN-adapt"
# Two epochs of fine-tuning instead of ds2 adapt's 4: the training set is twice the size it was.
"$DS2" adapt "$RUN/best.ckpt" "$CORPUS/adapt.jsonl" --out "$RUN-adapt" --rounds 1 train.epochs=2 |
  grep "^adapt:\|^done"
"$DS2" eval "$RUN-adapt/adapted.ckpt" "$CORPUS/test.jsonl" --worst 0
echo "== transcribe (adapted model, beam search + LM)"
mapfile -t files < <(python3 - "$CORPUS/test.jsonl" <<'PY'
import json, os, sys
manifest = sys.argv[1]
for line in list(open(manifest))[:5]:
    print(os.path.join(os.path.dirname(manifest), json.loads(line)["audio_filepath"]))
PY
)
"$DS2" transcribe "$RUN-adapt/adapted.ckpt" "${files[@]}"
echo "(references:)"
head -5 "$CORPUS/test.jsonl" | python3 -c 'import json,sys; [print(json.loads(l)["text"]) for l in sys.stdin]'
