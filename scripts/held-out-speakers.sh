#!/usr/bin/env bash
# Leave-one-speaker-out on the digits: each FSDD speaker in turn is held out, a model is trained
# on the other four with configs/fsdd.yaml (or --config), evaluated on the held-out speaker's test
# takes (greedy and with the config's LM), then adapted with `ds2 adapt` on that speaker's other,
# untranscribed takes and evaluated again. Prints one row per speaker and the mean (every test
# set has the same 1243 words, so the mean is also the pooled WER).
#
#   scripts/held-out-speakers.sh --jobs 5 -- run.device=cuda      # the README's table, one GPU
#   scripts/held-out-speakers.sh --speakers "george lucas" --no-adapt
#   scripts/held-out-speakers.sh --jobs 5 --config configs/fsdd-gru.yaml -- run.device=cuda
#
# Options: --config FILE (configs/fsdd.yaml), --speakers "S ..." (all five), --out DIR
#          (runs/held-out), --jobs N (speakers at once, 1), --no-adapt, --adapt-args "ARGS"
#          (passed to ds2 adapt, e.g. "--keep 0.5"),
#          --eval-args "ARGS" (passed to every ds2 eval, e.g. "--warps 0.92,0.96,1,1.04,1.08"),
#          --corpus-args "ARGS" (passed to make-fsdd-corpus.py; default: the recipe's extra
#          training voices, "--extra-data data/voices --extra-train 3000"; "" for FSDD alone),
#          --ds2 PATH (build/ds2), KEY=VALUE overrides for training (and adaptation) after --.
# A speaker's corpus, runs and evaluation reports (eval-*.txt: WER, CER, the five commonest word
# confusions) go to OUT/SPEAKER/; an existing folder is replaced. Each speaker's WERs go to stderr
# as it finishes; if any speaker fails, the table holds the others and the exit status is 1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPEAKERS="jackson george lucas nicolas yweweler"
OUT="runs/held-out"
CONFIG="$ROOT/configs/fsdd.yaml"
JOBS=1
ADAPT=1
ADAPT_ARGS=""
EVAL_ARGS=""
CORPUS_ARGS="--extra-data $ROOT/data/voices --extra-train 3000"
DS2="${DS2:-$ROOT/build/ds2}"
OVERRIDES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) CONFIG="$2"; shift 2 ;;
    --speakers) SPEAKERS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --no-adapt) ADAPT=0; shift ;;
    --adapt-args) ADAPT_ARGS="$2"; shift 2 ;;
    --eval-args) EVAL_ARGS="$2"; shift 2 ;;
    --corpus-args) CORPUS_ARGS="$2"; shift 2 ;;
    --ds2) DS2="$2"; shift 2 ;;
    --) shift; OVERRIDES=("$@"); break ;;
    *) echo "held-out-speakers.sh: unknown option '$1' (see the comment at the top)" >&2; exit 2 ;;
  esac
done
[ -f "$CONFIG" ] || { echo "held-out-speakers.sh: no config file $CONFIG" >&2; exit 2; }
[ -x "$DS2" ] || { echo "held-out-speakers.sh: no ds2 binary at $DS2 (scripts/build.sh)" >&2; exit 2; }
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "held-out-speakers.sh: --jobs must be >= 1" >&2; exit 2; }

# Each job's share of the cores for its loader threads: data.loader_threads' default rule
# (src/data/loader_threads.h, auto_loader_threads) with the jobs as the host's ranks, which ds2
# cannot see (its default would hand every job all of them); a data.loader_threads after -- still
# wins, coming later.
LOADER_THREADS=$(($(nproc 2>/dev/null || echo 2) / JOBS - 1))
((LOADER_THREADS < 2)) && LOADER_THREADS=2
((LOADER_THREADS > 16)) && LOADER_THREADS=16
# And its share for the CPU backend's compute threads (run.threads, the same rule as the ranks on
# a host get, src/core/cpu_threads.h; a GPU run has no use for them).
COMPUTE_THREADS=$(($(nproc 2>/dev/null || echo 2) / JOBS))
((COMPUTE_THREADS < 1)) && COMPUTE_THREADS=1

# "WER 23.73% (...)" -> 23.73
wer_of() { sed -n 's/^WER \([0-9.]*\)%.*/\1/p'; }

# score DIR CHECKPOINT NAME [--greedy]: the checkpoint on DIR's test takes; keeps the report (with
# the voice's commonest confusions) in DIR/eval-NAME.txt and prints the WER.
score() {
  # shellcheck disable=SC2086  # EVAL_ARGS is a list of options
  "$DS2" eval "$2" "$1/corpus/test.jsonl" --confusions 5 $EVAL_ARGS "${@:4}" |
    tee "$1/eval-$3.txt" | wer_of
}

# One speaker: corpus, training, evaluation, adaptation; writes OUT/S/result (five fields).
one_speaker() {
  local s="$1" dir="$OUT/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  # shellcheck disable=SC2086  # CORPUS_ARGS is a list of options
  python3 "$ROOT/scripts/make-fsdd-corpus.py" --out "$dir/corpus" --test-speaker "$s" \
    $CORPUS_ARGS >"$dir/corpus.log"
  "$DS2" train "$CONFIG" run.dir="$dir/run" \
    data.train_manifest="$dir/corpus/train.jsonl" data.dev_manifest="$dir/corpus/dev.jsonl" \
    data.loader_threads="$LOADER_THREADS" run.threads="$COMPUTE_THREADS" \
    ${OVERRIDES[@]+"${OVERRIDES[@]}"} >"$dir/train.log" 2>&1
  local g l ag=- al=-
  g=$(score "$dir" "$dir/run/best.ckpt" greedy --greedy)
  l=$(score "$dir" "$dir/run/best.ckpt" lm)
  if [ "$ADAPT" = 1 ]; then
    # shellcheck disable=SC2086  # ADAPT_ARGS is a list of options
    "$DS2" adapt "$dir/run/best.ckpt" "$dir/corpus/adapt.jsonl" --out "$dir/adapt" $ADAPT_ARGS \
      data.loader_threads="$LOADER_THREADS" run.threads="$COMPUTE_THREADS" \
      ${OVERRIDES[@]+"${OVERRIDES[@]}"} >"$dir/adapt.log" 2>&1
    ag=$(score "$dir" "$dir/adapt/adapted.ckpt" adapted-greedy --greedy)
    al=$(score "$dir" "$dir/adapt/adapted.ckpt" adapted-lm)
  fi
  echo "$s $g $l $ag $al" >"$dir/result"
  # As each speaker finishes, so a run cut short (a timeout) still shows what it measured.
  echo "held-out-speakers.sh: $s done: WER greedy $g, with the LM $l, adapted $ag / $al" >&2
}

mkdir -p "$OUT"
pids=()
for s in $SPEAKERS; do
  one_speaker "$s" &
  pids+=($!)
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
finished=()
for s in $SPEAKERS; do
  if [ -f "$OUT/$s/result" ]; then
    finished+=("$s")
  else
    echo "held-out-speakers.sh: $s failed (logs in $OUT/$s/)" >&2
    failed=1
  fi
done
# The table holds the speakers that finished (the mean is over them); any failure exits 1.
[ "${#finished[@]}" -gt 0 ] || exit 1

python3 - "$OUT" "${finished[@]}" <<'PY'
import sys
out, speakers = sys.argv[1], sys.argv[2:]
rows = [open(f"{out}/{s}/result").read().split() for s in speakers]
print("| held-out speaker | greedy | with the LM | after ds2 adapt, greedy | after ds2 adapt, with the LM |")
print("|---|---|---|---|---|")
cell = lambda v: "-" if v == "-" else f"{float(v):.2f}%"
for r in rows:
    print(f"| {r[0]} | " + " | ".join(cell(v) for v in r[1:]) + " |")
means = []
for i in range(1, 5):
    vals = [r[i] for r in rows]
    means.append("-" if "-" in vals else f"{sum(map(float, vals)) / len(vals):.2f}%")
print(f"| mean of {len(rows)} | " + " | ".join(means) + " |")
PY
[ "$failed" = 0 ] || exit 1
