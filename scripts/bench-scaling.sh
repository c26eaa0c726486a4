#!/usr/bin/env bash
# Strong scaling of the training step: a fixed global batch split over 1, 2, 4, ... GPUs of one
# host (per-GPU batch = global / GPUs), synthetic utterances, ds2's own engine and NCCL gradient
# allreduce. Prints step time, audio-seconds/s, speedup and efficiency against 1 GPU, and the time
# per step spent waiting on communication that backward did not hide. For several GPUs it also
# times one GPU alone at the per-GPU batch, which splits the efficiency into two factors:
#   per-GPU batch: 1-GPU step at the global batch / (GPUs x 1-GPU step at the per-GPU batch),
#                  what smaller per-GPU batches cost even with free communication;
#   overhead:      step - 1-GPU step at the per-GPU batch, what running together adds.
#
#   scripts/bench-scaling.sh                                   # GPUs 1 2 4, global batch 16 and 32
#   scripts/bench-scaling.sh --gpus "1 2 4 8" --batches 32     # issue 10's 8-GPU table
#   scripts/bench-scaling.sh --network                         # NCCL over its network transport
#                                                              # (no P2P/SHM): a multi-node stand-in
# Options: --config FILE (configs/ds2-large.yaml), --seconds S (10), --steps N (10),
#          --ds2 PATH (build/ds2), extra KEY=VALUE config overrides after --.
# NCCL's NVLink multicast stays off (NCCL_NVLS_ENABLE=0): it can take shared GPUs out of service.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPUS="1 2 4"
BATCHES="16 32"
CONFIG="$ROOT/configs/ds2-large.yaml"
SECONDS_PER_UTT=10
STEPS=10
DS2="${DS2:-$ROOT/build/ds2}"
NETWORK=0
OVERRIDES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus) GPUS="$2"; shift 2 ;;
    --batches) BATCHES="$2"; shift 2 ;;
    --config) CONFIG="$2"; shift 2 ;;
    --seconds) SECONDS_PER_UTT="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --ds2) DS2="$2"; shift 2 ;;
    --network) NETWORK=1; shift ;;
    --) shift; OVERRIDES=("$@"); break ;;
    *) echo "bench-scaling: unknown option '$1' (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ -x "$DS2" ] || { echo "bench-scaling: no ds2 binary at $DS2 (build first, or --ds2 PATH)" >&2; exit 2; }

export NCCL_NVLS_ENABLE=0
TRANSPORT="NVLink/P2P (NCCL default)"
if [ "$NETWORK" = 1 ]; then
  export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
  TRANSPORT="network (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)"
fi
VISIBLE=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
VISIBLE=${VISIBLE:-0}
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE
        -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x LD_LIBRARY_PATH -x PATH)

echo "# strong scaling: $(basename "$CONFIG"), ${SECONDS_PER_UTT} s utterances, $STEPS timed steps"
echo "# transport: $TRANSPORT; GPUs visible: $VISIBLE; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
printf "%-6s %-5s %-8s %10s %12s %8s %10s %12s %8s %14s %9s\n" batch GPUs per-GPU "step ms" \
  "audio-s/s" speedup efficiency "comm wait" "share" "per-GPU batch" "overhead"
# One GPU's step time at a batch size (ms), each size timed once.
declare -A ALONE=()
step_ms() { sed -n 's/^step \([0-9.]*\) ms.*/\1/p' <<<"$1"; }
alone_ms() {
  local b=$1
  if [ -z "${ALONE[$b]:-}" ]; then
    local out
    out=$("$DS2" bench step "$CONFIG" --batch "$b" --seconds "$SECONDS_PER_UTT" --steps "$STEPS" \
          "${OVERRIDES[@]}" 2>&1) ||
      { echo "$out" >&2; echo "bench-scaling: 1-GPU run at batch $b failed" >&2; exit 1; }
    ALONE[$b]=$(step_ms "$out")
  fi
}

for batch in $BATCHES; do
  base=""
  for n in $GPUS; do
    # Without GPUs (run.device=cpu) the ranks are CPU processes: any count runs.
    if { [ "$VISIBLE" -gt 0 ] && [ "$n" -gt "$VISIBLE" ]; } || [ $((batch % n)) -ne 0 ]; then
      printf "%-6s %-5s %s\n" "$batch" "$n" "skipped: $VISIBLE GPUs visible or batch not divisible"
      continue
    fi
    cmd=("$DS2" bench step "$CONFIG" --batch "$batch" --seconds "$SECONDS_PER_UTT" --steps "$STEPS"
         "${OVERRIDES[@]}")
    if [ "$n" -gt 1 ]; then cmd=("${MPIRUN[@]}" -np "$n" "${cmd[@]}"); fi
    out=$("${cmd[@]}" 2>&1) || { echo "$out" >&2; echo "bench-scaling: run failed: ${cmd[*]}" >&2; exit 1; }
    ms=$(step_ms "$out")
    audio=$(sed -n 's/.*| *\([0-9.]*\) audio-s\/s$/\1/p' <<<"$out")
    wait_ms=$(sed -n 's/^communication wait not hidden by backward \([0-9.]*\) ms.*/\1/p' <<<"$out")
    wait_ms=${wait_ms:-0}
    [ -n "$base" ] || base=$ms
    if [ "$n" -eq 1 ]; then
      ALONE[$batch]=${ALONE[$batch]:-$ms}
      alone=""
    else
      alone_ms $((batch / n))
      alone=${ALONE[$((batch / n))]}
    fi
    awk -v b="$batch" -v n="$n" -v ms="$ms" -v a="$audio" -v base="$base" -v w="$wait_ms" \
        -v alone="$alone" 'BEGIN {
      printf "%-6s %-5s %-8s %10.2f %12.1f %8.2f %9.1f%% %9.2f ms %7.1f%%", b, n, b / n, ms, a,
             base / ms, 100 * base / (ms * n), w, 100 * w / ms
      if (alone == "") printf "\n"
      else printf " %13.1f%% %6.2f ms\n", 100 * base / (n * alone), ms - alone }'
  done
done
