// Which recurrence a layer runs where a persistent plan fits: the measured rules that send a pass
// to the GEMM recurrence (nn/cuda/gemm_recurrence.h) because it is faster there. Each rule keeps
// the measurements it rests on beside it (recurrence_choice.cpp); CudaRnnLayer applies them and
// logs the reason.
//
//   if (plan.fits() && !plan.tiling().tensor_cores &&
//       relu_fp32_math_on_gemm(hidden, directions, batch))
//     ...  // the GEMM recurrence
//   const bool gemm_forward = !gru_plan.forward_on_tensor_cores() &&
//                             batch > gru_fma_max_batch(precision, hidden, directions, false);
#pragma once

#include "core/precision.h"
#include "nn/cuda/persistent_gru.h"

namespace ds2 {

// GRU layers run a pass that is off the tensor cores (the fp32-math kernel, 4 batch rows a pass)
// on the GEMM recurrence past this batch: bf16 past 8 (backward-data past 16 to H 1024), fp32
// past 28-40 by H with one direction, past 40 (H <= 1024) or 24 with two.
int gru_fma_max_batch(Precision precision, int hidden, int directions, bool backward);

// Whether an fp32 clipped-ReLU layer whose plan is on the fp32-math kernel runs the GEMM
// recurrence at this batch.
bool relu_fp32_math_on_gemm(int hidden, int directions, int batch);

// Whether a bf16 clipped-ReLU layer whose plan is on tensor cores runs the GEMM recurrence at this
// batch (H 2304-4096 only; one direction or two alike since session 73).
bool relu_bf16_tensor_on_gemm(int hidden, int batch);

// Whether a bidirectional bf16 GRU layer's pass (backward-data: `backward`) that `plan` (one
// direction) runs one direction after the other on bf16 tensor cores runs the GEMM recurrence
// instead at this batch: its sets are too wide.
bool gru_in_turn_on_gemm(const PersistentGruPlan& plan, int directions, bool backward, int batch);

}  // namespace ds2
