#!/usr/bin/env bash
# ctest entry scripts.held_out_speakers (RUN_SERIAL: it trains several models at once):
# scripts/held-out-speakers.sh holds out two speakers in turn for a few steps each on the CPU
# (the numbers mean nothing; the plumbing does) with the GRU recipe given by --config, and prints
# a row of four WERs per speaker and their mean; an unknown option or a missing config exits 2.
#   tests/scripts/held_out_speakers_test.sh SOURCE_DIR DS2_BINARY
set -euo pipefail
SRC="$1"
DS2="$2"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Small corpora (with a few of the extra voices' utterances, as the recipe's): plumbing, not WER.
table=$(bash "$SRC/scripts/held-out-speakers.sh" --ds2 "$DS2" --speakers "george nicolas" --jobs 2 \
  --corpus-args "--train 200 --dev 20 --test 20 --adapt 20 --extra-data $SRC/data/voices --extra-train 50" \
  --out "$OUT" --config "$SRC/configs/fsdd-gru.yaml" --adapt-args "--rounds 1" --eval-args "--warps 0.96,1" -- run.device=cpu train.max_steps=4 train.log_every=1000) ||
  fail "held-out-speakers.sh exited $?"
for row in "| george | " "| nicolas | " "| mean of 2 | "; do
  line=$(grep -F -- "$row" <<<"$table") || fail "no row '$row' in: $table"
  percents=$(tr -cd '%' <<<"$line" | wc -c)
  [ "$percents" -eq 4 ] || fail "expected 4 WERs in '$line'"
done

# Each of the 2 jobs gets its share of the cores as CPU compute threads (run.threads).
share=$(($(nproc) / 2))
((share < 1)) && share=1
grep -q "device: cpu, $share threads" "$OUT/george/train.log" ||
  fail "george's training did not run on $share compute threads: $(grep -m1 '^device' "$OUT/george/train.log")"

set +e
unknown=$(bash "$SRC/scripts/held-out-speakers.sh" --speaker x 2>&1)
code=$?
set -e
[ "$code" -eq 2 ] || fail "an unknown option exited $code"
grep -q "unknown option '--speaker'" <<<"$unknown" || fail "no message naming the option: $unknown"
grep -q "rnn_type: gru" "$OUT/george/run/config.yaml" || fail "--config did not reach ds2 train"
grep -q '"speaker": "allison"' "$OUT/george/corpus/train.jsonl" || fail "--corpus-args did not reach the corpus"
for report in eval-greedy eval-lm eval-adapted-greedy eval-adapted-lm; do
  grep -q "^WER " "$OUT/nicolas/$report.txt" || fail "no WER line in $OUT/nicolas/$report.txt"
  grep -q "^frequency warps chosen" "$OUT/nicolas/$report.txt" || fail "--eval-args did not reach $report"
done

# A speaker that fails (no such speaker in the corpus) does not hide the ones that finished.
set +e
partial=$(bash "$SRC/scripts/held-out-speakers.sh" --ds2 "$DS2" --speakers "george nobody" --no-adapt \
  --corpus-args "--train 200 --dev 20 --test 20 --adapt 20" --out "$OUT/partial" \
  -- run.device=cpu train.max_steps=2 train.log_every=1000 2>&1)
code=$?
set -e
[ "$code" -eq 1 ] || fail "a failed speaker exited $code"
grep -q "^held-out-speakers.sh: george done: WER greedy [0-9.]*, with the LM [0-9.]*, adapted - / -$" <<<"$partial" ||
  fail "no progress line for george in: $partial"
grep -q "nobody failed (logs in $OUT/partial/nobody/)" <<<"$partial" || fail "no failure line in: $partial"
grep -qF "| george | " <<<"$partial" || fail "no row for the finished speaker in: $partial"
grep -qF "| mean of 1 | " <<<"$partial" || fail "no mean over the finished speaker in: $partial"

set +e
missing=$(bash "$SRC/scripts/held-out-speakers.sh" --ds2 "$DS2" --config "$OUT/none.yaml" 2>&1)
code=$?
set -e
[ "$code" -eq 2 ] || fail "a missing config exited $code"
grep -q "no config file $OUT/none.yaml" <<<"$missing" || fail "no message naming the file: $missing"
echo "held-out-speakers.sh: table and option checks passed"
