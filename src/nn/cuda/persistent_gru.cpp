#include "nn/cuda/persistent_gru.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/device_query.h"
#include "core/error.h"
#include "kernels/grid.h"
#include "kernels/persistent_rnn_mma.h"
#include "nn/cuda/persistent_rnn.h"
#include "nn/cuda/streamed_rows_search.h"

namespace ds2 {
namespace {

constexpr int kRowGroup = kernels::kPrnnRowGroup;
using kernels::ceil_div;

// The most register groups kernels/persistent_gru.cu instantiates for a pass's chunks.
int max_register_groups(bool backward, int chunks) {
  if (!backward) return chunks == 1 ? 8 : 4;
  return chunks == 3 ? 2 : 1;
}

}  // namespace

PersistentGruPlan::PersistentGruPlan(int hidden, int max_batch, int directions, int device,
                                     Precision precision, bool tensor_cores, bool streamed_rows,
                                     int min_streamed_groups) {
  DS2_CHECK(hidden > 0 && max_batch > 0 && (directions == 1 || directions == 2),
            "persistent GRU plan: hidden " << hidden << ", max batch " << max_batch
                                           << " and directions " << directions
                                           << " must be positive (directions 1 or 2)");
  if (device < 0) DS2_CUDA_CHECK(cudaGetDevice(&device));
  device_ = device;
  precision_ = precision;
  DeviceGuard guard(device);
  sm_count_ = device_attribute(cudaDevAttrMultiProcessorCount, device);
  const bool cooperative = device_attribute(cudaDevAttrCooperativeLaunch, device) != 0;
  const int max_threads = device_attribute(cudaDevAttrMaxThreadsPerBlock, device);
  const size_t smem_optin = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device);

  kernels::PgruTiling& t = tiling_;
  t.hidden = hidden;
  t.max_batch = max_batch;
  t.directions = directions;
  t.batch_tile = max_batch >= 3 ? 4 : max_batch;

  auto refuse = [&](const std::string& why) {
    std::ostringstream s;
    s << "persistent GRU (hidden " << hidden << ", batch " << max_batch << ", "
      << precision_name(precision) << ", " << directions
      << (directions == 1 ? " direction" : " directions in one launch") << ") does not fit on "
      << device_name(device) << " (" << sm_count_ << " SMs): " << why;
    fits_ = false;
    why_not_ = s.str();
  };
  if (!cooperative) {
    refuse("the device has no cooperative launches");
    return;
  }
  const int ctas_max = sm_count_ / directions;  // one CTA per SM: co-resident by construction
  if (ctas_max < 1) {
    refuse("fewer SMs than directions");
    return;
  }
  // The neurons spread over as many SMs as there are, in whole row groups.
  t.neurons_per_cta = static_cast<int>(ceil_div(ceil_div(hidden, ctas_max), kRowGroup) * kRowGroup);
  t.ctas_per_direction = static_cast<int>(ceil_div(hidden, t.neurons_per_cta));

  // One pass: the most register groups that fit without spilling, the rest in shared memory;
  // `stream`: past that, the fewest row groups streamed from L2 that leave the rest within shared
  // memory (at least min_streamed_groups).
  std::string reason;
  auto fit_pass = [&](bool backward, int chunks, bool stream) {
    kernels::PgruPass& p = backward ? t.backward : t.forward;
    p.chunks = chunks;
    p.threads = static_cast<int>(
        std::max<int64_t>(32, ceil_div(ceil_div(t.inputs(backward), 4 * chunks), 32) * 32));
    const char* name = backward ? "backward-data" : "forward";
    if (p.threads > max_threads) {
      std::ostringstream s;
      s << name << ": " << p.threads << " threads of " << 4 * chunks
        << " columns, more than a CTA can have";
      reason = s.str();
      return false;
    }
    const int groups = t.rows(backward) / kRowGroup;
    p.streamed_groups = 0;
    if (stream) {
      const bool fits = search_streamed_rows(
          std::min(groups, max_register_groups(backward, chunks)), groups, min_streamed_groups,
          [&](int nrg, int sg) {
            p.register_groups = nrg;
            p.streamed_groups = sg;
            if (!kernels::pgru_has_kernel(t, backward)) return StreamedCandidate::kFewerInRegisters;
            if (kernels::pgru_shared_bytes(t, backward) > smem_optin)
              return StreamedCandidate::kMoreStreamed;
            const kernels::PrnnKernelInfo info = kernels::pgru_kernel_info(t, backward);
            // The same kernel for every count of streamed groups.
            if (info.local_bytes > 0) return StreamedCandidate::kFewerInRegisters;
            if (info.blocks_per_sm < 1) {
              std::ostringstream s;
              s << name << ": with rows streamed from L2, a CTA of " << p.threads << " threads x "
                << info.registers << " registers does not fit on one SM";
              reason = s.str();
              return StreamedCandidate::kMoreStreamed;
            }
            registers_[backward ? 1 : 0] = info.registers;
            return StreamedCandidate::kFits;
          });
      if (!fits) p.streamed_groups = 0;
      return fits;
    }
    for (int nrg = std::min(groups, max_register_groups(backward, chunks)); nrg >= 0; --nrg) {
      p.register_groups = nrg;
      if (!kernels::pgru_has_kernel(t, backward)) continue;
      const size_t smem = kernels::pgru_shared_bytes(t, backward);
      std::ostringstream s;
      if (smem > smem_optin) {
        s << name << ": with " << nrg * kRowGroup << " of " << t.rows(backward)
          << " rows per CTA in registers the rest need " << kilobytes(smem)
          << " of shared memory, more than the " << kilobytes(smem_optin) << " allowed";
        reason = s.str();
        continue;
      }
      const kernels::PrnnKernelInfo info = kernels::pgru_kernel_info(t, backward);
      if (info.local_bytes > 0 || info.blocks_per_sm < 1) {
        s << name << ": a CTA of " << p.threads << " threads x " << info.registers << " registers ("
          << nrg * kRowGroup << " rows in registers" << (info.local_bytes > 0 ? ", spilling" : "")
          << ") and " << kilobytes(smem) << " of shared memory does not fit on one SM";
        reason = s.str();
        continue;
      }
      registers_[backward ? 1 : 0] = info.registers;
      return true;
    }
    return false;
  };
  // Forward one 4-column chunk per thread up to H 1600 (two beyond, as the clipped-ReLU kernel
  // measured faster there), else the other; backward-data with 3x the chunks (same threads).
  // Past the chip (or forced), the streamed forms: forward 2 chunks, backward-data 6, each pass
  // on chip where it fits (forced: streamed either way).
  bool ok = false;
  const bool forced = min_streamed_groups > 0;
  const int first = hidden >= 1600 ? 2 : 1;
  for (int chunks : {first, 3 - first}) {
    if (forced) break;
    if (fit_pass(false, chunks, false) && fit_pass(true, 3 * chunks, false)) {
      ok = true;
      break;
    }
  }
  const bool stream =
      forced || (streamed_rows && directions == 1 && max_batch <= kernels::kPrnnStreamedMaxBatch);
  if (!ok && stream) {
    ok = (!forced && fit_pass(false, 2, false)) || fit_pass(false, 2, true);
    ok = ok && ((!forced && fit_pass(true, 6, false)) || fit_pass(true, 6, true));
  }
  if (!ok) {
    refuse(reason.empty() ? "no kernel variant fits" : reason);
    // bf16: a plan with both passes on bf16 tensor cores launches no fp32-math kernel (bf16's dG
    // keeps fp32's exponent range: nothing reruns), so it runs where that kernel does not fit
    // (one direction past H 1568 at batch 9-16, in sets of 16 batch rows).
    if (precision == Precision::kBf16 && tensor_cores && !forced) {
      plan_mma(false, ctas_max, smem_optin, /*bf16=*/true);
      plan_mma(true, ctas_max, smem_optin, /*bf16=*/true);
      if (pass_in_bf16(false) && pass_in_bf16(true)) {
        fits_ = true;
        fp32_math_fits_ = false;
        why_not_.clear();
      } else {
        mma_tiling_[0] = mma_tiling_[1] = kernels::PrnnTiling{};
      }
    }
    return;
  }
  fits_ = true;
  if (tensor_cores && !forced) {
    // bf16: passes in bf16 on tensor cores (sets of 8, 16 or 32 batch rows, half the fp32 split's
    // bytes a weight; U and the exchanged state or dG rounded as the GEMM recurrence on bf16
    // operands rounds them). The forward takes them first, where it fits: it was faster than the
    // fp32 split at every size measured (H200, us a step, split / bf16, session 62: H 192 batch 4
    // 1.12 / 1.00, batch 16 1.22 / 0.96, H 256 batch 1 1.09 / 0.97, H 512 batch 1 1.21 / 1.02,
    // batch 4 1.37 / 1.18, batch 16 1.60 / 1.45, H 768 batch 1 1.36 / 1.27, H 1024 batch 1 1.46 /
    // 1.40, batch 8 1.97 / 1.87; the digits GRU step at batch 4 1.65 ms against 1.75).
    // Backward-data takes them only where the split's is off the tensor cores: the split's was
    // level at H <= 512 and faster from H 768 or batch 16 (H 1024 batch 4 2.28 against 2.78).
    if (precision == Precision::kBf16) plan_mma(false, ctas_max, smem_optin, /*bf16=*/true);
    if (precision == Precision::kFp32) plan_single_cta(smem_optin);
    if (!forward_on_tensor_cores() && !forward_single_cta()) plan_mma(false, ctas_max, smem_optin);
    plan_mma(true, ctas_max, smem_optin);
    // Not backward-data at batch 1 where the fp32-math kernel holds U on chip: it was the faster
    // (H200, us a step, fp32-math / bf16, session 62: H 1300 2.56 / 3.26, H 1400 2.60 / 3.73, H
    // 1536 2.79 / 3.75, H 1568 3.38 / 4.01; at batch 2 within 5% either way, from 3 bf16 by
    // 1.4-1.5x).
    const bool fp32_math_batch_1 = max_batch == 1 && tiling_.backward.streamed_groups == 0;
    if (precision == Precision::kBf16 && !backward_on_tensor_cores() && !fp32_math_batch_1)
      plan_mma(true, ctas_max, smem_optin, /*bf16=*/true);
  }
}

void PersistentGruPlan::plan_mma(bool backward, int ctas_max, size_t smem_optin, bool bf16) {
  // The fewest rows a CTA whose CTAs fit on the SMs, so the products and the epilogue's chain are
  // shortest; every padded state element owned. Forward (rows are gates): 16 rows (5 neurons),
  // stacked 24 (8), 32 (10), stacked 48 (16: both directions of H 661-1024); backward-data (rows
  // are neurons, K = 3H): the stacked split's 8, then 16. Fewer, wider CTAs were slower wherever
  // measured (H200, the forward, H 192-768 at batch 1 and 4: 32 or 48 rows 0.1-0.4 us a step
  // slower than the fewest that fit; kernels/NOTES.md, session 51; bf16 sets of 32 rows, the
  // forward at 32 rows against 48, session 62: H 1280 batch 32 4.93 / 5.12, H 1152 batch 32 4.76 /
  // 5.03, H 1088 batch 24 3.64 / 3.97). The split runs 4 batch rows a
  // set of CTAs: past batch 4 in batch groups of at most 4 rows, every set's CTAs beside the
  // others' (kernels::PrnnTiling::batch_groups, as the clipped ReLU's plan takes them).
  kernels::PrnnTiling m;
  m.hidden = tiling_.hidden;
  m.max_batch = tiling_.max_batch;
  m.directions = tiling_.directions;
  m.bf16_weights = bf16;
  m.threads = kernels::kPrnnMmaThreads;
  m.tensor_cores = true;
  m.tagged_exchange = true;
  m.gru = true;
  m.gru_backward = backward;
  // bf16: sets of one n-tile, 8 batch rows, U rounded to bf16 (16-row m-tiles: forward 5, 10 or
  // 16 neurons a CTA, backward-data 16 or 32); where those sets' CTAs exceed the SMs, sets of two
  // n-tiles, 16 rows (the same CTAs, half as many sets), then of four, 32 rows.
  const std::vector<int> set_rows =
      bf16 ? std::vector<int>{8, 16, 32} : std::vector<int>{kernels::kPrnnSplitSetRows};
  const std::vector<int> rows_tried = backward && bf16 ? std::vector<int>{16, 32}
                                      : backward       ? std::vector<int>{8, 16}
                                      : bf16           ? std::vector<int>{16, 32, 48}
                                                       : std::vector<int>{16, 24, 32, 48};
  for (int tile : set_rows) {
    m.batch_tile = tile;
    m.batch_groups = bf16 ? static_cast<int>(ceil_div(tiling_.max_batch, tile))
                          : kernels::prnn_split_batch_groups(tiling_.max_batch);
    if (m.sets() > m.max_sets()) continue;
    const int set_ctas_max = ctas_max / m.batch_groups;
    for (int rows : rows_tried) {
      m.rows_per_cta = rows;
      // Backward-data has only the stacked form; the forward's 48 rows too (six stacked m-tiles:
      // three 16-row ones spilled). bf16 has no split.
      m.stacked_split = !bf16 && (backward || rows == 48);
      m.ctas_per_direction = static_cast<int>(
          ceil_div(kernels::prnn_mma_state_owners(m), kernels::pgru_mma_neurons(m)));
      if (m.ctas_per_direction <= set_ctas_max &&
          tensor_tiling_runs(m, smem_optin, sm_count_, &mma_registers_[backward ? 1 : 0])) {
        mma_tiling_[backward ? 1 : 0] = m;
        return;
      }
    }
  }
}

void PersistentGruPlan::plan_single_cta(size_t smem_optin) {
  // fp32 at batch 1 to H 384, batch 2 to H 320, batch 3-4 to kPgruSingleMaxHiddenBatchTile4: the
  // forward on one CTA or a cluster a direction that holds all of U in registers and the state in
  // shared memory (no exchange through L2), where a cluster per direction can be resident.
  if (tiling_.max_batch > kernels::kPgruSingleMaxBatch) return;
  const kernels::PgruSingleTiling t =
      kernels::pgru_single_tiling(tiling_.hidden, tiling_.max_batch, tiling_.directions);
  if (kernels::pgru_single_kernel(t) == nullptr ||
      kernels::pgru_single_shared_bytes(t) > smem_optin)
    return;
  const kernels::PrnnKernelInfo info = kernels::pgru_single_kernel_info(t);
  const bool resident =
      t.ctas_per_direction == 1 ? info.blocks_per_sm >= 1 : info.max_clusters >= t.directions;
  if (info.local_bytes > 0 || !resident) return;
  single_ = t;
  single_registers_ = info.registers;
}

size_t PersistentGruPlan::fallback_workspace_offset() const {
  return backward_reruns_on_overflow()
             ? rerun_workspace_offset(kernels::prnn_mma_workspace_bytes(mma_tiling_[1]))
             : 0;
}

size_t PersistentGruPlan::workspace_bytes() const {
  if (!fits_) return 0;
  // The fp32-math kernel's own only where a pass runs on it or reruns on it.
  const bool fp32_math = (!forward_on_tensor_cores() && !forward_single_cta()) ||
                         !backward_on_tensor_cores() || backward_reruns_on_overflow();
  size_t bytes =
      fp32_math ? fallback_workspace_offset() + kernels::pgru_workspace_bytes(tiling_) : 0;
  for (int pass = 0; pass < 2; ++pass)
    if (mma_tiling_[pass].gru)
      bytes = std::max(bytes, kernels::prnn_mma_workspace_bytes(mma_tiling_[pass]));
  return bytes;
}

std::string PersistentGruPlan::describe() const {
  if (!fits_) return why_not_;
  const kernels::PgruTiling& t = tiling_;
  std::ostringstream s;
  s << "persistent GRU hidden " << t.hidden << ", batch <= " << t.max_batch << ", "
    << (!fp32_math_fits_ ? "fp32 weights (a bf16 copy for both passes; the fp32-math kernel does "
                           "not fit)"
        : pass_in_bf16(false) && pass_in_bf16(true) ? "fp32 weights (a bf16 copy for both passes)"
        : pass_in_bf16(false)                       ? "fp32 weights (a bf16 copy for the forward)"
        : pass_in_bf16(true)                        ? "fp32 weights (a bf16 copy for backward-data)"
                                                    : "fp32 weights")
    << ", " << (t.directions == 1 ? "1 direction" : "2 directions in one launch");
  // The fp32-math kernel's tiling, where it has one.
  if (fp32_math_fits_)
    s << ": " << t.directions * t.ctas_per_direction << " CTAs (of " << sm_count_ << " SMs), "
      << t.neurons_per_cta << " neurons per CTA, batch tile " << t.batch_tile;
  else
    s << " on " << sm_count_ << " SMs";
  for (bool bwd : {false, true}) {
    const kernels::PrnnTiling& m = mma_tiling_[bwd ? 1 : 0];
    if (!m.gru) continue;
    s << "; " << (bwd ? "backward-data" : "forward") << " on tensor cores (U and "
      << (bwd ? "dG" : "h") << (m.bf16_weights ? " in bf16" : " in fp16 halves")
      << ", tagged exchange"
      << (m.batch_groups > 1 ? ", " + std::to_string(m.batch_groups) + " batch groups a direction"
                             : "")
      << (m.bf16_weights ? ", sets of " + std::to_string(m.batch_tile) + " batch rows" : "")
      << "): " << m.ctas() << " CTAs of " << kernels::pgru_mma_neurons(m) << " neurons ("
      << m.rows_per_cta << " rows), " << mma_registers_[bwd ? 1 : 0] << " registers/thread, "
      << kilobytes(kernels::prnn_shared_bytes(m)) << " shared memory/CTA";
  }
  if (forward_single_cta()) {
    const kernels::PgruSingleTiling& g = single_;
    s << "; forward on "
      << (g.ctas_per_direction == 1
              ? std::string("one CTA")
              : "a cluster of " + std::to_string(g.ctas_per_direction) + " CTAs")
      << " a direction (U in registers, " << g.neurons_per_cta << " neurons a CTA, " << g.threads
      << " threads, batch tile " << g.batch_tile << "): " << single_registers_
      << " registers/thread, " << kilobytes(kernels::pgru_single_shared_bytes(g))
      << " shared memory/CTA";
  }
  for (bool bwd : {false, true}) {
    // backward-data's fp32-math kernel stays planned where it reruns the split's overflows.
    if (bwd ? backward_on_tensor_cores() && !backward_reruns_on_overflow()
            : forward_on_tensor_cores() || forward_single_cta())
      continue;
    const kernels::PgruPass& p = t.pass(bwd);
    const int rows = t.rows(bwd), reg_rows = p.register_groups * kRowGroup;
    s << "; " << (bwd ? "backward-data " : "forward ") << p.threads << " threads of "
      << 4 * p.chunks << " columns, " << reg_rows << " of " << rows << " rows in registers, "
      << (p.streamed_groups > 0
              ? std::to_string(p.streamed_groups * kRowGroup) + " streamed from L2 every step, "
              : std::string())
      << registers_[bwd ? 1 : 0] << " registers/thread, "
      << kilobytes(kernels::pgru_shared_bytes(t, bwd)) << " shared memory/CTA";
  }
  s << ", workspace " << kilobytes(workspace_bytes());
  return s.str();
}

bool directions_in_turn_faster(const PersistentGruPlan& both, const PersistentGruPlan& one,
                               bool backward) {
  DS2_CHECK(both.fits() && one.fits() && both.directions() == 2 && one.directions() == 1,
            "directions_in_turn_faster: needs a fitting two-direction and one-direction plan");
  // As the clipped-ReLU layer's rule, pass by pass: where the two-direction plan's pass left the
  // tensor cores (its batch groups or fragments past what half the SMs hold) and the
  // one-direction plan's did not. H200, us a step for both directions, forward / backward-data,
  // one launch against one after the other (`ds2 bench rnn --cell gru`'s both-directions line,
  // session 56; both passes off the tensor cores in one launch, on them one direction at a
  // time): H 256 batch 32 12.91 / 11.46 against 2.97 / 2.65, H 512 batch 16 8.78 / 7.61 against
  // 3.17 / 3.27, H 768 batch 8 6.89 / 6.17 against 3.48 / 4.38, H 1024 batch 8 8.06 / 7.45
  // against 3.95 / 5.18, H 1152 batch 3 6.50 / 6.37 against 3.81 / 5.53, batch 4 6.52 / 6.70
  // against 3.86 / 5.46. At batch 1-2 the forward still gains, the backward-data does not (H
  // 1152 batch 1 3.94 / 3.34 against 3.48 / 5.26, batch 2 4.76-4.78 / 3.96-4.01 against
  // 3.54-3.58 / 5.33-5.40). Where both plans' pass is on tensor cores, or neither, one launch
  // was the faster (H 256-1024 batch 1-4, H 512-1024 batch 32: 16.45 / 13.64 against 28.12 /
  // 26.05 at H 512).
  const bool both_off = backward ? !both.backward_on_tensor_cores()
                                 : !both.forward_on_tensor_cores() && !both.forward_single_cta();
  const bool one_on = backward ? one.backward_on_tensor_cores() : one.forward_on_tensor_cores();
  return both_off && one_on && (!backward || both.max_batch() >= 3);
}

int PersistentGruPlan::max_hidden(int max_batch, int directions, int device, bool streamed) {
  int best = 0;
  // Rounding of neurons per CTA makes "fits" not quite monotone in H: every multiple of 32.
  for (int h = 32; h <= 4096; h += 32) {
    PersistentGruPlan plan(h, max_batch, directions, device, Precision::kFp32, true, streamed);
    if (plan.fits()) best = h;
  }
  return best;
}

namespace {

void launch(const PersistentGruPlan& plan, bool backward, const kernels::PgruDirection* dirs,
            const int* lengths, int T, int B, void* workspace, size_t workspace_bytes,
            cudaStream_t stream) {
  check_persistent_launch("persistent GRU", backward ? "backward-data" : "forward", plan.fits(),
                          plan.why_not(), B, plan.max_batch(), workspace_bytes,
                          plan.workspace_bytes(), plan.device());
  if (!backward && plan.forward_single_cta()) {
    kernels::pgru_single_forward_launch(plan.single_cta_tiling(), dirs, lengths, T, B, stream);
  } else if (!backward && plan.forward_on_tensor_cores()) {
    kernels::pgru_mma_forward_launch(plan.mma_forward_tiling(), dirs, lengths, T, B, workspace,
                                     stream);
  } else if (backward && plan.backward_on_tensor_cores()) {
    kernels::pgru_mma_backward_launch(plan.mma_backward_tiling(), dirs, lengths, T, B, workspace,
                                      stream);
    // Where the fp16 split's scaled gradients overflowed (or dy held a NaN or infinity), the
    // fp32-math kernel reruns backward-data, decided on the device from the split's overflow word.
    // (bf16's dG keeps fp32's exponent range: nothing to rerun.)
    if (plan.backward_reruns_on_overflow())
      kernels::pgru_launch(plan.tiling(), true, dirs, lengths, T, B,
                           static_cast<char*>(workspace) + plan.fallback_workspace_offset(), stream,
                           kernels::prnn_mma_overflow_flag(plan.mma_backward_tiling(), workspace));
  } else {
    kernels::pgru_launch(plan.tiling(), backward, dirs, lengths, T, B, workspace, stream);
  }
}

}  // namespace

void persistent_gru_forward(const PersistentGruPlan& plan, const kernels::PgruDirection* dirs,
                            const int* lengths, int T, int B, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream) {
  launch(plan, false, dirs, lengths, T, B, workspace, workspace_bytes, stream);
}

void persistent_gru_backward_data(const PersistentGruPlan& plan, const kernels::PgruDirection* dirs,
                                  const int* lengths, int T, int B, void* workspace,
                                  size_t workspace_bytes, cudaStream_t stream) {
  launch(plan, true, dirs, lengths, T, B, workspace, workspace_bytes, stream);
}

}  // namespace ds2
