#include "nn/cuda/recurrence_choice.h"

#include "kernels/persistent_rnn_mma.h"

namespace ds2 {

// GRU layers run a pass that is off the tensor cores (the fp32-math kernel, 4 batch rows a pass)
// on the GEMM recurrence past these batches (CudaRnnLayer::plan_persistent_gru says why). bf16: the
// forward past 8, backward-data past 16 to H 1024 and past 8 above (H200, us a step, fp32-math
// kernel / GEMM recurrence on bf16 operands, host-launched; forward, session 58: H 256 batch 64
// 24.77 / 11.04, H 512 batch 33 15.56 / 12.39, H 1024 batch 48 25.63 / 10.36, H 1536 batch 24
// 22.05 / 11.02; backward-data, session 60: H 401 batch 24 9.83 / 12.47, H 512 batch 32 13.02 /
// 10.19, H 768 batch 24 13.23 / 11.19, H 1024 batch 16 10.87 / 12.30, batch 33 20.82 / 12.88, H
// 1536 batch 12 14.29 / 12.88). fp32 (where the fp16 split's batch groups end: one direction past
// batch 8-32, both past 16), from `ds2 bench step
// configs/ds2-large.yaml run.device=cuda model.rnn_layers=2 model.rnn_type=gru
// model.rnn_hidden=H model.bidirectional=D --batch B --seconds 2 --steps 4 --warmup 1`, rnn1's ms
// a step (forward + backward, projections and weight gradients included), persistent / GEMM
// recurrence (H200, session 66): one direction H 512 batch 24 2.54 / 2.84, batch 32 3.32 / 3.09;
// H 768 batch 24 3.78 / 4.00, batch 32 4.78 / 4.39, batch 64 9.22 / 5.86; H 1024 batch 24 4.44 /
// 5.16, batch 32 5.71 / 5.68, batch 48 8.30 / 7.23; H 1536 batch 32 10.02 / 10.90, batch 48 14.56
// / 13.86; H 256 batch 48 (past the split) 3.80 / 2.32. Both directions: H 512 batch 32 4.17 /
// 4.24, batch 48 6.09 / 5.27; H 1024 batch 32 8.89 / 9.17, batch 48 12.85 / 11.87, batch 64 17.06
// / 14.31; H 1536 (in turn) batch 24 15.34 / 15.71, batch 32 19.55 / 17.69, batch 64 37.64 /
// 27.31. Before, graph-timed GEMM rows were not measured (session 65) and fp32 layers stayed
// persistent at every batch.
int gru_fma_max_batch(Precision precision, int hidden, int directions, bool backward) {
  if (precision == Precision::kBf16) return backward && hidden <= 1024 ? 16 : 8;
  if (directions == 2) return hidden <= 1024 ? 40 : 24;
  return hidden <= 768 ? 28 : hidden <= 1024 ? 32 : 40;
}

// fp32 clipped-ReLU layers on the fp32-math kernel (past the fp16 split's batch groups: one
// direction past batch 32, both past 16) run on the GEMM recurrence where it was faster: the
// fp32-math kernel's time grows with every pass of 4 batch rows, the GEMM recurrence's much less.
// `ds2 bench step configs/ds2-large.yaml run.device=cuda model.rnn_layers=2
// model.rnn_hidden=H model.bidirectional=D --batch B --seconds 2 --steps 4 --warmup 1`, rnn1's ms
// a step, persistent / GEMM recurrence (H200, session 66): one direction H 512 batch 48 2.56 /
// 2.33, batch 64 3.32 / 2.48; H 1024 batch 64 4.20 / 4.25; H 1536 batch 64 6.72 / 7.71; H 2048
// batch 48 7.81 / 8.45, batch 56 8.86 / 8.86, batch 64 10.38 / 9.80; H 2560 batch 56 13.75 /
// 14.05, batch 64 15.26 / 14.75; H 3072 batch 56 17.06 / 16.76, batch 64 19.78 / 18.51. Both
// directions: H 512 batch 64 3.38 / 3.34; H 1024 batch 48 5.54 / 5.76, batch 64 7.14 / 6.63; H
// 1920 batch 48 13.72 / 13.89, batch 64 17.67 / 15.89; H 2560 (in turn) batch 64 30.30 / 26.91.
// One direction between H 512 and 1024 (session 67, the same command): H 640 batch 48 2.77 /
// 2.97, batch 56 3.14 / 3.05, batch 64 3.52 / 3.15; H 768 batch 48 2.96 / 3.00, batch 56 3.35 /
// 3.14, batch 64 3.88 / 3.36; H 896 batch 48 3.11 / 3.59, batch 56 3.67 / 3.94, batch 64 4.11 /
// 3.93.
bool relu_fp32_math_on_gemm(int hidden, int directions, int batch) {
  if (directions == 2) return hidden >= 1024 && batch > 56;
  if (hidden <= 512 && batch > 44) return true;
  return batch > 56 && (hidden < 1024 || hidden >= 1792);
}

// bf16 clipped-ReLU layers on tensor cores at H 2304-3072 run on the GEMM recurrence past batch 56,
// from H 2688 past batch 40 (session 73; one direction past 48 before it), and at H 3073-4096
// past batch 32 (session 73, below): there every CTA's share of the products
// takes passes of at most 32 batch columns (past H 3072 kBf16WidestMaxBatch refuses the plan beyond
// batch 48). `ds2 bench rnn --precision bf16 --hidden H --batch B --repeats 5 --warmup 1`
// (graph-timed, one direction), us a step forward / backward-data, persistent against the GEMM
// recurrence (H200, session 66): H 2304 batch 48 7.28 / 7.36 against 7.46 / 8.05, batch 64 8.55 /
// 8.65 against 7.58 / 8.18; H 2560 batch 64 8.84 / 8.96 against 8.12 / 8.59; H 2688 batch 33 9.04
// / 9.18 against 9.23 / 9.24, batch 48 10.26 / 10.31 against 9.45 / 9.25, batch 64 12.53 / 12.70
// against 8.42 / 8.94; H 3072 batch 33 9.34 / 9.44 against 10.19 / 10.16, batch 64 13.06 / 13.20
// against 9.10 / 9.58. Seven layers (`ds2 bench step configs/ds2-large.yaml run.device=cuda
// train.precision=bf16 model.rnn_hidden=H --batch B`), ms a step, persistent / GEMM recurrence:
// one direction H 2304 batch 64 46.24 / 45.16, H 3072 batch 64 63.47 / 54.15, but H 2816 batch 48
// 48.39 / 48.83 (so one direction waited for batch 57 until session 67); both directions H 2560
// batch 64 81.35 / 64.74, H 2816 batch 48 (in turn) 83.12 / 66.61. One direction from H 2688 at
// batch 49-56 (session 67, `ds2 bench step configs/ds2-large.yaml run.device=cuda
// train.precision=bf16 model.rnn_layers=2 model.rnn_hidden=H model.bidirectional=false --batch B
// --seconds 2 --steps 4 --warmup 1`, rnn1's ms a step persistent / GEMM recurrence): H 2816 batch
// 49 3.24 / 2.66, batch 52 3.29 / 2.71, batch 56 3.32 / 2.75; H 2688 batch 56 3.27 / 2.69; H 3072
// batch 52 3.43 / 2.95, batch 56 3.48 / 3.11. So one direction there leaves past batch 48.
// Session 73: the GEMM recurrence's bf16 GEMMs of 24-63 rows run padded to 64 at H 2688-4096
// (gemm_recurrence_gemm_rows), and one direction leaves the tensor cores earlier: past batch 40 at
// H 2688-3072 and past 32 at H 3073-4096 (where past 48 the plan refuses the tensor cores). The
// same command, forward / backward-data, persistent against the padded GEMM recurrence (cuDNN's
// best 16-bit forward in brackets): H 2688 batch 40 8.99 / 9.12 against 8.87 / 9.10 (8.82), batch
// 48 10.11 / 10.23 against 8.87 / 8.88 (9.06); H 2816 batch 40 9.10 / 9.22 against 9.07 / 8.85,
// batch 48 10.17 / 10.32 against 9.06 / 8.92 (8.98); H 3072 batch 40 9.30 / 9.42 against 9.45 /
// 9.29, batch 48 10.43 / 10.55 against 9.47 / 9.34 (9.91); H 3328 batch 24 6.49 / 6.56 against 9.69
// / 9.45, batch 33 10.31 / 10.45 against 9.75 / 9.51 (10.45), batch 48 11.64 / 11.77 against 9.87 /
// 9.75 (10.51); H 3584 batch 40 10.52 / 10.63 against 10.23 / 10.11 (10.76), batch 48 11.85 / 11.98
// against 10.26 / 10.17; H 4096 batch 32 9.04 / 9.16 against 10.65 / 10.71, batch 40 11.52 / 11.61
// against 10.73 / 10.82 (12.49), batch 48 12.95 / 13.09 against 10.76 / 11.02 (12.79).
// Bidirectional layers of H 3073-4096 (their directions in turn on tensor cores, the GEMM
// recurrence's side by side) leave past batch 32 too: `ds2 bench step configs/ds2-large.yaml
// run.device=cuda train.precision=bf16 model.rnn_layers=2 model.rnn_hidden=H
// train.persistent_rnn=true|false --batch B --seconds 2 --steps 4 --warmup 1`, rnn1's ms a step
// persistent / GEMM recurrence: H 3328 batch 32 4.64 / 4.41, batch 33 5.78 / 4.41; H 4096 batch 32
// 5.66 / 6.74, batch 33 6.77 / 6.85, batch 40 7.04 / 7.16; H 3584 batch 24 4.03 / 4.72; and seven
// layers of 3328 (`--seconds 3 --steps 4`) at batch 40 8.65 / 7.03, at 48 9.81 / 7.66. The rule
// costs H 4096 at batch 33-40 1-2%.
bool relu_bf16_tensor_on_gemm(int hidden, int batch) {
  if (hidden < 2304 || hidden > 4096) return false;
  if (hidden > 3072) return batch > 32;
  if (hidden >= 2688) return batch > 40;
  return batch > 56;
}

// A bidirectional bf16 GRU layer whose pass runs its directions one after the other on bf16
// tensor cores (both do not fit the SMs at once) runs that pass on the GEMM recurrence past this
// many batch rows a set: every CTA reads its set's whole state from L2 every step, and the GEMM
// recurrence runs the two directions side by side. H200, `ds2 bench step
// configs/ds2-large.yaml run.device=cuda train.precision=bf16 model.rnn_type=gru
// model.rnn_hidden=H --batch B`, seven bidirectional layers, ms a step persistent (in turn) / GEMM
// recurrence, rows a set in brackets (session 62): H 1024 batch 40 (20) 45.54 / 50.05, batch 48
// (24) 49.18 / 56.10, batch 56 (28) 59.11 / 56.78, batch 64 (32) 63.05 / 60.78; H 1056 batch 48
// (24) 52.89 / 63.34, batch 64 (32) 67.87 / 65.02; H 1152 batch 17 37.69 / 45.70, batch 24 42.39 /
// 44.30, batch 32 53.07 / 49.86; H 1216 batch 20 40.66 / 44.53; H 1280 batch 17 39.28 / 40.28,
// batch 24 44.28 / 44.40, batch 32 55.87 / 54.34; H 1320 batch 24 53.32 / 54.73.
// Backward-data past 16 k-tiles a warp (H 1366-1877) in sets of more than 8 rows runs the kernels
// of 18-22 zeroed first, 8.6-10.9 us a step: two in turn lose to the GEMM recurrence's side by side
// (session 64, two rounds: H 1536 batch 16 45.60-45.62 / 38.65-38.73, H 1400 batch 12 41.53-41.59
// / 39.80, H 1600 batch 16 50.62-50.72 / 41.87-41.97).
// The same holds where H is not a multiple of 8 since the GEMM recurrence pads its bf16 GEMMs'
// dimensions (session 65, in turn / GEMM recurrence: H 1100 batch 32 59.62 / 58.43, H 1700 batch
// 16 61.35 / 56.57, H 1877 batch 12 70.47 / 66.75, H 1550 batch 12 53.27 / 48.57, H 1450 batch 12
// 46.61 / 43.28, H 1020 batch 64 76.14 / 73.45, H 1150 batch 32 61.61 / 59.17; one loss at the
// edge, H 1300 batch 28, 63.94 / 65.38). Unpadded, in session 64, those GEMMs ran 2-2.6x slower
// and every pass at such H ran in turn.
namespace {
constexpr int kGruInTurnBf16MaxSetRows = 24;
constexpr int kGruInTurnBf16BackwardMaxSetRowsPast16KTiles = 8;
}  // namespace

bool gru_in_turn_on_gemm(const PersistentGruPlan& plan, int directions, bool backward, int batch) {
  if (directions != 2 || !plan.fits() || plan.directions() != 1 || !plan.pass_in_bf16(backward))
    return false;
  const kernels::PrnnTiling& m = backward ? plan.mma_backward_tiling() : plan.mma_forward_tiling();
  const int rows = m.group_rows(batch);
  if (backward && kernels::prnn_mma_k_tiles_per_warp(m.inputs()) > 16)
    return rows > kGruInTurnBf16BackwardMaxSetRowsPast16KTiles;
  return rows > kGruInTurnBf16MaxSetRows;
}

}  // namespace ds2
