#include "nn/cuda/persistent_rnn.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>

#include "core/cuda/check.h"
#include "core/cuda/device_query.h"
#include "core/error.h"
#include "kernels/persistent_rnn_cluster.h"
#include "kernels/persistent_rnn_mma.h"
#include "kernels/persistent_rnn_single.h"
#include "nn/cuda/streamed_rows_search.h"

namespace ds2 {
namespace {

constexpr int kRowGroup = kernels::kPrnnRowGroup;
// bf16 weights off the tensor cores (the fp32-math kernel, which redoes its products every batch
// pass of 4): plans take it up to this batch (four passes); past it the GEMM recurrence on bf16
// operands is faster (nn/cuda/gemm_recurrence.h; measured in the constructor).
constexpr int kFmaBf16MaxBatch = 16;
// bf16 at 14-16 k-tiles a warp (one direction of H 3073-4096 on tensor cores, most A fragments
// in shared memory) past this batch: the rest of shared memory holds passes of at most 16 batch
// columns, and four of them lose to the GEMM recurrence on bf16 operands (measured in the
// constructor).
constexpr int kBf16WidestMaxBatch = 48;
// ... and the tagged exchange at 14 k-tiles a warp up to this batch (measured in the constructor).
constexpr int kBf16WideTaggedMaxBatch = 3;
// fp32 small layers run on one CTA per direction up to this hidden size times batch tile (measured
// in the constructor).
constexpr int kSingleCtaMaxWork = 256;

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// Spreads `rows` rows over at most `ctas` CTAs a direction, rows_per_cta a multiple of `unit`.
void spread_rows(kernels::PrnnTiling& t, int rows, int ctas, int unit) {
  t.rows_per_cta = ceil_div(ceil_div(rows, ctas), unit) * unit;
  t.ctas_per_direction = ceil_div(rows, t.rows_per_cta);
}
// The tensor-core kernels' rows: H padded to whole k-tiles (kernels::prnn_mma_padded_rows), each
// with an owner (the stacked split's 24-row CTAs had left the last 8 unowned where ceil(H / 24)
// is odd and H within 8 of a multiple of 24, e.g. H 2136, and the launch hung; the launch's
// tiling check refuses such tilings now).
void spread_tensor_rows(kernels::PrnnTiling& t, int ctas, int unit) {
  spread_rows(t, kernels::prnn_mma_padded_rows(t.hidden), ctas, unit);
}

}  // namespace

PersistentRnnPlan::PersistentRnnPlan(int hidden, int max_batch, int directions, int device,
                                     Precision precision, PersistentRnnKernels allowed) {
  DS2_CHECK(hidden > 0 && max_batch > 0 && (directions == 1 || directions == 2),
            "persistent RNN plan: hidden " << hidden << ", max batch " << max_batch
                                           << " and directions " << directions
                                           << " must be positive (directions 1 or 2)");
  if (device < 0) DS2_CUDA_CHECK(cudaGetDevice(&device));
  device_ = device;
  DeviceGuard guard(device);
  sm_count_ = device_attribute(cudaDevAttrMultiProcessorCount, device);
  const bool cooperative = device_attribute(cudaDevAttrCooperativeLaunch, device) != 0;
  const int max_threads = device_attribute(cudaDevAttrMaxThreadsPerBlock, device);
  const size_t smem_optin = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  const size_t smem_sm = device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
  const int regs_sm = device_attribute(cudaDevAttrMaxRegistersPerMultiprocessor, device);

  kernels::PrnnTiling& t = tiling_;
  t.hidden = hidden;
  t.max_batch = max_batch;
  t.directions = directions;
  t.bf16_weights = precision == Precision::kBf16;
  // Batch rows per pass: the whole batch when it is 1 or 2, else passes of 4.
  t.batch_tile = max_batch >= 3 ? 4 : max_batch;

  auto refuse = [&](const std::string& why) {
    std::ostringstream s;
    s << "persistent RNN (hidden " << hidden << ", batch " << max_batch << ", "
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

  auto take_tensor_tiling = [&](const kernels::PrnnTiling& c) {
    if (!tensor_tiling_runs(c, smem_optin, sm_count_, &registers_)) return false;
    t = c;
    fits_ = true;
    return true;
  };
  // The tensor-core kernels' k-tiles a warp at this size (K = H whatever the rows a CTA), which
  // decide where their fragments live (kernels::prnn_mma_kernel_k_tiles).
  const int kernel_k_tiles =
      kernels::prnn_mma_kernel_k_tiles(kernels::prnn_mma_k_tiles_per_warp(hidden));
  // bf16 on tensor cores, grid-wide (orders 1 and 3 below, for c's rows and batch groups): the
  // tagged exchange where a set's batch is one n-tile, and the step barrier, widest pass first.
  // At 14 k-tiles a warp the tagged kernel holds 4 k-tiles' fragments in registers, the step
  // barrier's 6: from batch 4 the barrier was faster (H200, us a step forward, tagged / barrier,
  // two rounds, session 59: H 3104 batch 4 3.26-3.27 / 3.20-3.21, batch 8 3.53-3.55 / 3.25-3.31;
  // H 3328 batch 4 3.28-3.31 / 3.25-3.26, batch 8 3.49-3.54 / 3.29-3.31; H 3584 batch 4
  // 3.41-3.44 / 3.33-3.35, batch 6 3.59-3.63 / 3.39-3.44), at batch 1-3 mostly the tagged (H 3328
  // batch 1 3.04-3.05 / 3.25-3.27, H 3584 batch 3 3.28-3.30 / 3.35-3.39; H 3104 batch 3 3.28-3.31
  // / 3.18-3.19).
  const bool wide_k = kernel_k_tiles == 14;
  auto take_tagged_bf16 = [&](kernels::PrnnTiling c) {
    if (!allowed.tagged_exchange || c.group_batch() > (wide_k ? kBf16WideTaggedMaxBatch : 8))
      return false;
    c.batch_tile = 8;
    c.tagged_exchange = true;
    return take_tensor_tiling(c);
  };
  // Where the widest pass keeps some A fragments in shared memory, a narrower one with all of
  // them in registers comes first if it needs at most 3 passes a step. H200, 48 rows a CTA at H
  // 1344-1536, us a step forward / backward-data, narrower against wider (session 56): both
  // directions batch 33-48 (3 passes of 8 against 1 of 32) 5.14-5.44 / 5.24-5.47 against
  // 5.26-5.70 / 5.40-5.82, batch 24 (2 of 8 against 1 of 16) level; one direction batch 48-64 (2
  // of 8 against 1 of 16) 3.87-4.01 / 3.93-4.07 against 3.92-4.14 / 4.01-4.18, but batch 33 (the
  // second pass nearly empty) 3.76-3.78 against 3.68-3.72. At 4 passes the wider won (both
  // directions batch 64: 6.42-6.54 against 6.60-6.66).
  auto take_widest_pass = [&](kernels::PrnnTiling c) {
    constexpr int kPasses[] = {64, 32, 16, 8};
    for (int i = 0; i < 4; ++i) {
      if (kPasses[i] > 8 && kPasses[i] / 2 >= c.group_batch()) continue;
      c.batch_tile = kPasses[i];
      int registers = 0;
      if (!tensor_tiling_runs(c, smem_optin, sm_count_, &registers)) continue;
      if (kernels::prnn_mma_bf16_shared_k_tiles(c) > 0)
        for (int j = i + 1; j < 4; ++j) {
          kernels::PrnnTiling narrower = c;
          narrower.batch_tile = kPasses[j];
          const int passes = (c.group_batch() + kPasses[j] - 1) / kPasses[j];
          if (passes <= 3 && kernels::prnn_mma_bf16_shared_k_tiles(narrower) == 0 &&
              take_tensor_tiling(narrower))
            return true;
        }
      return take_tensor_tiling(c);
    }
    return false;
  };

  // bf16: products on tensor cores when every row fits in that kernel's registers (no spills);
  // otherwise the fp32-math kernel below, which can also keep rows in shared memory. In order:
  // 1. at batch <= 8 (one n-tile per pass), the grid-wide kernel with the tagged exchange (no
  //    step barrier): 0.07-0.37 us a step faster than the barrier, and than the cluster kernel
  //    from H 512 up (at H 256 the cluster is 0.03-0.06 us faster). Wider passes poll their
  //    n-tiles one after another and read twice the bytes: 0.75-1.5 us slower at batch 32.
  // 2. one thread-block cluster per direction when U fits in 16 SMs' registers (the state
  //    exchanged through distributed shared memory) and the device holds a cluster per direction;
  //    with 4 m-tiles per CTA (H > 768) only at batch <= 4 (kernels/NOTES.md, versions 4, 5).
  // 3. the grid-wide kernel with a step barrier per direction, widest batch pass first (fewer
  //    passes per step; narrower ones need fewer accumulators). One pass of 64 (one m-tile per
  //    CTA) against two of 32, H200, us a step forward (session 43): H 2048 batch 64 7.82-7.83 ->
  //    7.38, batch 48 6.52 -> 6.16-6.17, batch 33 5.84-5.86 -> 5.54-5.61; H 1536 batch 64
  //    6.81-6.87 -> 6.69, H 1024 6.31 -> 5.95-5.96.
  // Tests of the streamed rows ask for them at sizes that fit on chip: the fp32-math kernel only.
  const bool forced_stream = allowed.min_streamed_groups > 0;
  // fp32 layers of H * (batch rounded to 1, 2 or 4) <= 256: one CTA per direction holds all of U
  // in registers and the state in shared memory, so a step ends with one CTA barrier instead of an
  // exchange through L2 (kernels/persistent_rnn_single.h). H200, `ds2 bench rnn --hidden H --batch
  // B --ours-only`, graph-timed, forward / backward-data us a step, this kernel (version 11: rows
  // summed over 8 lanes) against the grid-wide fp16 split in the same run (session 68): batch 1 H
  // 32 0.24 / 0.24 against 0.77 / 0.82, H 128 0.44 / 0.47 against 0.78 / 0.83, H 192 0.60 / 0.65
  // against 0.86 / 0.87; batch 2 H 64 0.35 / 0.35 against 0.75 / 0.80, H 128 0.54 / 0.55 against
  // 0.77 / 0.81, but H 160 0.80 / 0.80 against 0.80 / 0.83; batch 3-4 H 32 0.35 / 0.36 against
  // 0.83 / 0.91, H 64 0.53 / 0.54 against 0.76 / 0.81, but H 96 0.77 / 0.79 against 0.77 / 0.82
  // and H 128 1.03 / 1.09 against 0.79 / 0.83. One SM's products set its pace as H or the batch
  // grow. At batch 1, H 193-512 run on a cluster of 8 or 16 such CTAs a direction, each pushing
  // its rows of the state into the others' shared memory (same session): H 256 0.47 / 0.47
  // against 0.88 / 0.90, H 384 0.56 / 0.56 against 0.88 / 0.89, H 512 0.60 / 0.60 against 0.92 /
  // 0.93 (where the clusters cannot all be resident, the split); at batch 2, H 129-384 on clusters
  // of 8: H 160 0.48 / 0.52 against 0.84 / 0.91, H 256 0.60 / 0.63 against 0.91 / 0.93, H 384 0.87
  // / 0.90 against 0.92 / 0.94; at batch 3-4, H 65-192 on clusters of 8 (session 72, batch 4): H 80
  // 0.52 / 0.53 against 0.77 / 0.82, H 128 0.57 / 0.58 against 0.79 / 0.83, H 192 0.77 / 0.79
  // against 0.87 / 0.90.
  // Tests may ask for it wherever it runs (PersistentRnnKernels::force_single_cta).
  if (!forced_stream && !t.bf16_weights && allowed.single_cta) {
    const kernels::PrnnTiling c = kernels::prnn_single_tiling(hidden, max_batch, directions);
    const bool measured_faster =
        hidden * c.batch_tile <= kSingleCtaMaxWork || c.ctas_per_direction > 1;
    if ((measured_faster || allowed.force_single_cta) && kernels::prnn_has_kernel(c)) {
      const kernels::PrnnKernelInfo info = kernels::prnn_kernel_info(c);
      const bool resident = c.ctas_per_direction == 1 || info.max_clusters >= directions;
      if (info.local_bytes == 0 && info.blocks_per_sm >= 1 && resident) {
        t = c;
        registers_ = info.registers;
        fits_ = true;
        return;
      }
    }
  }
  kernels::PrnnTiling m = t;
  m.tensor_cores = true;
  m.threads = kernels::kPrnnMmaThreads;
  spread_tensor_rows(m, ctas_max, 16);
  m.register_groups = m.rows_per_cta / kRowGroup;
  // fp32 at batch 1-4: the tensor-core kernel with U and the
  // state split into fp16 halves, tagged exchange, with the fp32-math kernel as its fallback
  // (kernels/NOTES.md, versions 6-8, sessions 28, 40-42). H100, forward us a step: batch 4 H
  // 512-1024 1.15-1.50 (then on the tf32 split) against the step barrier's 1.75-2.09; at batch 1
  // and H 512 the fp32-math tagged kernel is faster (1.08 against 1.11). H200: batch 4 H 1152
  // 1.57 and H 1536 1.83-1.88 against the barrier's 2.17-2.28; batch 1 H 1152 1.52-1.54 against
  // 1.60. With the optimistic products (session 41) the split takes batch 1 up to H 1536 (1.52
  // against the barrier's 1.68); beyond, the barrier still won (H 1792 1.85 against 1.89, H 2048
  // 1.82 against 2.03). At two m-tiles and 9-10 k-tiles per warp (H 2113-2560, some of U's hi
  // halves in shared memory) the split won from batch 3 (H 2560 batch 3 3.16 against 3.68, batch
  // 4 3.18-3.24 against 3.63), not at batch 2 (3.03 against 2.93; H 2304 2.91 against 2.79).
  // Session 42's tagged fp16 halves made every split step faster (H 1536 batch 1 1.54 -> 1.43,
  // H 2048 batch 2 2.09-2.14 -> 1.66-1.67), and session 43 measured the thresholds again (below).
  // Where 8-row m-tiles put fewer rows on a CTA than 16-row ones, the stacked split (24 rows
  // instead of 32: one direction of H 2113-2560, both directions of H 1057-1584; session 43,
  // H200, us a step forward against the 16-row split: H 2560 batch 4 2.52 -> 2.43-2.44, both
  // directions of H 1152 1.52 -> 1.34-1.36 and at batch 1 1.49-1.51 -> 1.30, of H 1536 1.70-1.72
  // -> 1.59-1.60). It also wins at batch 2: H 2560 2.38 against the step barrier's 2.94. And at
  // batch 1 the split now wins at every H from 513 (session 43, forward / backward-data against
  // the barrier: H 1792 1.57-1.58 / 1.59-1.60 against 1.86 / 1.91-1.92, H 2048 1.60-1.61 /
  // 1.64-1.65 against 1.83-1.84 / 1.90-1.91, H 2560 2.35-2.36 / 2.42-2.44 against 2.45-2.47 /
  // 2.66).
  // The split runs batch rows 4 at a time (one n-tile: each row's hi and lo halves in columns b
  // and b + 4). Past batch 4 it takes batch groups of at most 4 rows (up to kPrnnMaxSets sets:
  // one direction to batch 32, both to 16), each set of CTAs on its own slice of the batch with
  // its own exchange, where every set's CTAs fit beside the others' (fewer SMs a set, so more
  // rows a CTA; kernels::PrnnTiling::batch_groups). H200, us a step forward, the fp32-math
  // kernel against this (session 51): H 1152 batch 8 3.30 -> 1.31, H 2048 batch 8 4.52 -> 2.07,
  // H 512 batch 16 4.01 -> 0.98, both directions of H 192 batch 16 3.82 -> 0.94.
  // Batch 1 at H <= 512 ran the fp32-math tagged kernel until session 67, which measured the split
  // faster there (H200, `ds2 bench rnn --hidden H --batch 1 --ours-only`, graph-timed, forward /
  // backward-data us a step, fp32-math tagged against the split): H 128 0.96 / 1.00 against 0.78
  // / 0.82, H 192 1.39 / 1.41 against 0.85 / 0.87, H 256 1.00 / 1.03 against 0.86 / 0.89, H 384
  // 1.01 / 1.03 against 0.87 / 0.89, H 512 1.04 / 1.07 against 0.91 / 0.93. Fewer CTAs with more
  // rows each were no faster (H 256 on 8 CTAs of 32 rows 0.85 / 0.89, H 512 on 16 1.03 / 1.05).
  auto take_fp16_split = [&](int groups) {
    kernels::PrnnTiling c = m;
    c.batch_groups = groups;
    if (c.sets() > kernels::kPrnnMaxSets) return false;
    spread_tensor_rows(c, ctas_max / groups, 16);
    c.register_groups = c.rows_per_cta / kRowGroup;
    kernels::PrnnTiling stacked = c;
    spread_tensor_rows(stacked, ctas_max / groups, 8);
    stacked.register_groups = stacked.rows_per_cta / kRowGroup;
    const bool try_stacked = allowed.stacked_split && stacked.rows_per_cta < c.rows_per_cta;
    const bool hi_shared = !try_stacked && kernels::prnn_mma_hi_in_shared(c);  // 32-row CTAs
    const bool wins = groups > 1 || !hi_shared || max_batch >= 3;
    if (!wins) return false;
    c.batch_tile = stacked.batch_tile = kernels::kPrnnSplitSetRows;
    c.tagged_exchange = stacked.tagged_exchange = true;
    // The fp16 split only with a fallback that fits (it is an fp32-math plan of this shape).
    PersistentRnnKernels fp32_math{allowed.cluster, false, false};
    fp32_math.streamed_rows = false;
    fp32_math.single_cta = false;  // the rerun is a conditional launch (run_if)
    auto fallback = std::make_shared<const PersistentRnnPlan>(hidden, max_batch, directions, device,
                                                              precision, fp32_math);
    if (!fallback->fits() ||
        !((try_stacked && take_tensor_tiling(stacked)) || take_tensor_tiling(c)))
      return false;
    fallback_plan_ = std::move(fallback);
    return true;
  };
  // Tests that force streamed rows skip every tensor-core plan and rule.
  if (!forced_stream) {
    if (!t.bf16_weights && allowed.tagged_exchange && allowed.fp16_split) {
      const int groups = kernels::prnn_split_batch_groups(max_batch);
      if ((groups == 1 || allowed.batch_groups) && take_fp16_split(groups)) return;
    }
    if (t.bf16_weights && allowed.batch_groups && max_batch > 8) {
      // Batch groups: 2 (4) sets of CTAs per direction, each on its own slice of the batch with its
      // own exchange. Every CTA reads its set's whole state each step, which past batch 8 is most
      // of the step (H 2048 batch 64: 128 CTAs x 256 KB a step from L2, ~4.5 TB/s at 7.4 us).
      // Groups divide that read even where fewer SMs a set put 2-3 times the rows on a CTA: the
      // products a CTA stay the same. Among plans whose sets are at most 8 rows (the tagged
      // exchange, no step barrier) the fewest rows a CTA win, then the most groups; else the most
      // groups that some kernel runs without spills. H200, us a step forward, one set -> groups
      // (session 54; until then groups were taken only at the one set's rows a CTA): H 2048 batch
      // 64 7.42 -> 5.45 (2 groups, 32 rows), batch 32 4.45 -> 3.37, batch 9 2.94 -> 2.19 (tagged);
      // H 1536 batch 64 6.68 -> 3.98 (4 groups, 48 rows); H 1152 batch 64 6.26 -> 3.65, batch 32
      // 3.70 -> 1.91 (4 groups, tagged), batch 9-16 2.51-2.63 -> 1.35-1.43 (2 tagged groups of 32
      // rows; 4 of 48: 1.62-1.65); H 1536 batch 9-16 2.66-2.89 -> 1.52-1.59 (2 tagged groups; 4
      // groups of 48 rows, which spilled tagged until session 56, 2.38-2.48 with the step barrier);
      // H 1024 batch 64 3.76 (2 groups of 16 rows) -> 2.84 (4 of 32). At batch 9-12 and H 768, 4
      // tagged groups of 32 rows ran 1.10-1.11 against 2 of 16 rows' 1.07-1.08. Session 44, at the
      // same rows a CTA: H 512 batch 64 5.28 -> 3.23 (2) -> 2.37 (4), batch 16 2.21 -> 1.03 ->
      // 0.98; H 256 batch 64 5.00 -> 2.17.
      kernels::PrnnTiling grouped[2];  // 4 groups, then 2, where the sets fit
      int candidates = 0;
      for (int groups : {4, 2}) {
        kernels::PrnnTiling g = m;
        g.batch_groups = groups;
        if (g.sets() > kernels::kPrnnMaxBf16Sets) continue;
        spread_tensor_rows(g, sm_count_ / g.sets(), 16);
        g.register_groups = g.rows_per_cta / kRowGroup;
        grouped[candidates++] = g;
      }
      const bool fewer_rows_last =
          candidates == 2 && grouped[1].rows_per_cta < grouped[0].rows_per_cta;
      for (int i = 0; i < candidates; ++i)
        if (take_tagged_bf16(grouped[fewer_rows_last ? candidates - 1 - i : i])) return;
      for (int i = 0; i < candidates; ++i)
        if (take_widest_pass(grouped[i])) return;
    }
    // H200, us a step forward, this kernel / the GEMM recurrence / cuDNN's best 16-bit algorithm
    // (session 59): batch 64 H 3200 14.96 / 12.60 / 12.04, H 3328 15.15 / 12.82 / 12.57, H 3584
    // 15.47 / 13.29 / 12.56; batch 48 H 3200-3584 (passes of 32 and 16) 11.58-11.95 / 14.09-16.82 /
    // 14.87-15.38, H 3712-4096 (16 k-tiles a warp, three passes of 16) 12.64-13.12 / 16.21-23.10 /
    // 16.23-23.59.
    if (t.bf16_weights && max_batch > kBf16WidestMaxBatch && kernel_k_tiles >= 14) {
      refuse("past batch " + std::to_string(kBf16WidestMaxBatch) +
             " the tensor-core kernel at 14-16 k-tiles a warp runs passes of at most 16 batch "
             "columns, slower than the GEMM recurrence on bf16 operands");
      return;
    }
    if (t.bf16_weights) {
      if (take_tagged_bf16(m)) return;
      const int kpw = kernels::prnn_mma_k_tiles_per_warp(hidden);  // the cluster's m-tiles per CTA
      if (allowed.cluster && max_batch <= kernels::kPrnnClusterMaxBatch &&
          (kpw < kernels::kPrnnClusterMaxTiles ||
           (kpw == kernels::kPrnnClusterMaxTiles && max_batch <= 4)) &&
          take_tensor_tiling(kernels::prnn_cluster_tiling(hidden, max_batch, directions)))
        return;
      if (take_widest_pass(m)) return;
    }
    // bf16 off the tensor cores past four batch passes: the fp32-math kernel redoes its products
    // every pass of 4, the GEMM recurrence on bf16 operands reads U once a step. H200, us a step
    // forward, this kernel against the GEMM recurrence and cuDNN's best 16-bit algorithm (session
    // 58): H 3328 batch 9-12 14.65-14.66 / 19.44-20.94 / 19.68-21.64, batch 16 19.06 / 20.56 /
    // 21.11, batch 24 27.74 / 14.62 / 18.97, batch 64 72.08 / 12.27 / 12.01; H 3584 batch 24 28.14
    // / 14.23 / 14.13, batch 64 72.36 / 13.10 / 12.87.
    if (t.bf16_weights && max_batch > kFmaBf16MaxBatch) {
      refuse("the tensor-core kernels do not hold it, and past batch " +
             std::to_string(kFmaBf16MaxBatch) +
             " the fp32-math kernel on bf16 weights (4 batch rows a pass) is slower than the GEMM "
             "recurrence on bf16 operands");
      return;
    }
  }

  // Spread the rows over as many SMs as there are, in whole row groups (a partial group costs
  // as much as a full one, so fewer CTAs with full groups are free and lighten the exchange).
  spread_rows(t, hidden, ctas_max, kRowGroup);
  const int groups = t.rows_per_cta / kRowGroup;
  const int outputs = groups * kRowGroup * t.batch_tile;  // one per thread in the epilogue
  const int max_groups = std::min(groups, t.bf16_weights ? kernels::kPrnnMaxRegisterGroupsBf16
                                                         : kernels::kPrnnMaxRegisterGroups);
  std::string smem_reason, sm_reason, threads_reason, streamed_reason;
  // Most rows in registers that still fit, the rest in shared memory; kernels that spill only
  // when nothing else fits.
  auto try_chunks = [&](int chunks) {
    t.chunks = chunks;
    t.threads = ceil_div(std::max(ceil_div(hidden, 4 * chunks), outputs), 32) * 32;
    if (t.threads > max_threads) {
      std::ostringstream s;
      s << "one thread per " << 4 * chunks << " columns needs " << t.threads
        << " threads per CTA, more than the " << max_threads << " a CTA can have";
      threads_reason = s.str();
      return;
    }
    // fp32 at batch 1 and H <= 512 where the fp16 split is not allowed (session 67 measured the
    // split faster there): the tagged exchange (H200, forward / backward-data us a step
    // against the step barrier: H 512 1.10 / 1.12-1.13 vs 1.52-1.55 / 1.56-1.59 on three machine
    // starts). At H 1152 two starts gave 1.19 / 1.26 and a third 2.09-2.10 / 2.13-2.17 against
    // 1.69-1.74; at H 2048 its backward-data lost (2.68 vs 2.04); on bf16 weights it lost to the
    // tensor cores at H 1152 and 2048, and at batch 4-32 to the barrier (kernels/NOTES.md,
    // version 5). Beyond H 512 a launch can fall into a slow state it keeps: after a scattered
    // start (backward-data's column loads of U) or at some exchange placements; a start barrier
    // cures the first only, and where the fp32 split is slowest (H 2176-2560) this kernel at its
    // best is no faster (session 48).
    t.tagged_exchange = allowed.tagged_exchange && max_batch == 1 && !t.bf16_weights &&
                        hidden <= 512 && chunks == 1;
    for (int pass = 0; pass < 2 && !fits_; ++pass) {
      for (int nrg = max_groups; nrg >= 0 && !fits_; --nrg) {
        t.register_groups = nrg;
        if (!kernels::prnn_has_kernel(t)) continue;
        const size_t smem = kernels::prnn_shared_bytes(t);
        std::ostringstream s;
        if (smem > smem_optin) {
          s << "with " << nrg * kRowGroup << " of " << t.rows_per_cta
            << " rows per CTA in registers the rest need " << kilobytes(smem)
            << " of shared memory per CTA, more than the " << kilobytes(smem_optin) << " allowed";
          smem_reason = s.str();
          continue;
        }
        const kernels::PrnnKernelInfo info = kernels::prnn_kernel_info(t);
        if (pass == 0 && info.local_bytes > 0) continue;
        if (info.blocks_per_sm < 1) {
          s << "a CTA of " << t.threads << " threads x " << info.registers << " registers ("
            << nrg * kRowGroup << " rows in registers) and " << kilobytes(smem)
            << " of shared memory does not fit on one SM (" << regs_sm << " registers, "
            << kilobytes(smem_sm) << ")";
          if (sm_reason.empty()) sm_reason = s.str();
          continue;
        }
        if (int64_t{info.blocks_per_sm} * sm_count_ < t.ctas()) {
          s << t.ctas() << " CTAs cannot be co-resident";
          sm_reason = s.str();
          continue;
        }
        registers_ = info.registers;
        fits_ = true;
      }
    }
  };
  // Two 4-column chunks per thread (half the threads, so half the reduction across them) at
  // batch passes of 4 from H 1600; elsewhere, and where one chunk does not fit, the other form.
  // H100, forward us a step, one chunk -> two (kernels/NOTES.md, session 30): fp32 batch 4
  // H 1600 3.33 -> 3.12, H 2048 3.35-3.38 -> 3.11-3.12, H 2560 4.30-4.36 -> 4.24-4.28; batch 16
  // H 1920 9.80 -> 8.66; batch 32 H 2048 18.1 -> 16.0; but batch 8 H 1152 3.70 -> 4.40, batch 1
  // H 2048 2.02 -> 2.39, batch 2 H 2048 level. bf16 (where the tensor-core kernels do not fit)
  // batch 4 H 2999 5.17-5.24 -> 4.69-4.70, H 3584 6.53-6.55 -> 5.93-5.95, batch 32 H 2999
  // 32.05-32.16 -> 25.75-26.01. Two chunks also fit where one does not (fp32 H 2656-3072, bf16
  // 3616-3680 at batch 4): a thread holds twice the weights in fewer, larger register sets.
  const int first = t.batch_tile == 4 && hidden >= 1600 ? 2 : 1;
  if (!forced_stream) {
    try_chunks(first);
    if (!fits_) try_chunks(3 - first);
  }
  // Past what registers and shared memory hold: the most rows in registers that run without
  // spills, the fewest row groups streamed from L2 that leave the rest within shared memory. One
  // direction and at most two batch passes: every pass of a step reads the streamed rows again
  // (H200, bf16 H 4096, us a step forward: batch 1 4.61, batch 4 7.30, batch 6-8 13.11-13.16,
  // batch 16 24.59 against cuDNN's best 16-bit 10.23, 16.92, 15.00-15.07, 15.52; session 57). A
  // bidirectional layer then runs its directions one after the other, each streaming half what
  // one launch of both would.
  const bool stream = forced_stream || (allowed.streamed_rows && directions == 1 &&
                                        max_batch <= kernels::kPrnnStreamedMaxBatch);
  if (!fits_ && stream) {
    t.chunks = 2;
    t.tagged_exchange = false;
    t.threads = ceil_div(std::max(ceil_div(hidden, 8), outputs), 32) * 32;
    if (t.threads <= max_threads)
      fits_ = search_streamed_rows(
          max_groups, groups, allowed.min_streamed_groups, [&](int nrg, int sg) {
            t.register_groups = nrg;
            t.streamed_groups = sg;
            if (!kernels::prnn_has_kernel(t)) return StreamedCandidate::kFewerInRegisters;
            if (kernels::prnn_shared_bytes(t) > smem_optin) return StreamedCandidate::kMoreStreamed;
            const kernels::PrnnKernelInfo info = kernels::prnn_kernel_info(t);
            // The same kernel for every count of streamed groups.
            if (info.local_bytes > 0) return StreamedCandidate::kFewerInRegisters;
            if (info.blocks_per_sm < 1 || int64_t{info.blocks_per_sm} * sm_count_ < t.ctas()) {
              std::ostringstream s;
              s << "with rows streamed from L2, a CTA of " << t.threads << " threads x "
                << info.registers << " registers (" << nrg * kRowGroup << " rows in registers, "
                << sg * kRowGroup << " streamed) does not fit on one SM";
              streamed_reason = s.str();
              return StreamedCandidate::kMoreStreamed;
            }
            registers_ = info.registers;
            return StreamedCandidate::kFits;
          });
    if (!fits_) t.streamed_groups = 0;
  }
  if (!fits_ && !streamed_reason.empty())
    smem_reason += (smem_reason.empty() ? "" : "; ") + streamed_reason;
  if (!fits_ && sm_reason.empty() && smem_reason.empty()) sm_reason = threads_reason;
  if (!fits_) {
    std::string why = sm_reason;
    if (!smem_reason.empty()) why += (why.empty() ? "" : "; ") + smem_reason;
    refuse(why.empty() ? "no kernel variant fits" : why);
  }
}

size_t PersistentRnnPlan::fallback_workspace_offset() const {
  return rerun_workspace_offset(kernels::prnn_workspace_bytes(tiling_));
}

size_t PersistentRnnPlan::workspace_bytes() const {
  if (!fits_) return 0;
  if (!fallback_plan_) return kernels::prnn_workspace_bytes(tiling_);
  return fallback_workspace_offset() + fallback_plan_->workspace_bytes();
}

size_t PersistentRnnPlan::shared_bytes() const {
  return fits_ ? kernels::prnn_shared_bytes(tiling_) : 0;
}

std::string PersistentRnnPlan::describe() const {
  if (!fits_) return why_not_;
  const kernels::PrnnTiling& t = tiling_;
  const int reg_rows = t.register_groups * kRowGroup;
  const int streamed_rows = t.streamed_groups * kRowGroup;
  std::ostringstream s;
  s << "persistent RNN hidden " << t.hidden << ", batch <= " << t.max_batch << ", "
    << precision_name(precision()) << " weights, "
    << (t.directions == 1 ? "1 direction" : "2 directions in one launch") << ": " << t.ctas()
    << " CTAs (of " << sm_count_ << " SMs"
    << (t.batch_groups > 1 ? ", " + std::to_string(t.batch_groups) + " batch groups a direction"
                           : std::string())
    << ") x " << t.threads << " threads"
    << (t.chunks > 1 ? " of " + std::to_string(4 * t.chunks) + " columns" : "") << ", "
    << t.rows_per_cta << " rows per CTA ("
    << (t.single_cta && t.ctas_per_direction == 1
            ? std::string("all in registers; the state in shared memory, no exchange between CTAs")
        : t.single_cta ? "all in registers; a cluster of " + std::to_string(t.ctas_per_direction) +
                             " CTAs a direction, each pushing its rows of the state into the "
                             "others' shared memory"
        : kernels::prnn_mma_stacked_split(t)
            ? std::string("8-row tiles of hi over lo parts, some in registers, the rest in shared "
                          "memory")
        : kernels::prnn_mma_hi_in_shared(t)
            ? std::string("most hi parts in registers, the rest and lo parts in shared memory")
        : kernels::prnn_mma_lo_in_shared(t)
            ? std::string("their hi parts in registers, lo parts in shared memory")
        : kernels::prnn_mma_bf16_shared_k_tiles(t) > 0
            ? "the last " + std::to_string(kernels::prnn_mma_bf16_shared_k_tiles(t)) +
                  " k-tiles of each warp in shared memory, the rest in registers"
            : std::to_string(reg_rows) + " in registers, " +
                  std::to_string(t.rows_per_cta - reg_rows - streamed_rows) + " in shared memory" +
                  (streamed_rows > 0
                       ? ", " + std::to_string(streamed_rows) + " streamed from L2 every step"
                       : std::string()))
    << "), "
    << (t.state_in_bf16()                 ? "tensor cores (bf16 state), "
        : kernels::prnn_mma_half_split(t) ? "tensor cores (U and state split into fp16 halves), "
                                          : "")
    << (t.tagged_exchange ? "tagged exchange (no step barrier), " : "")
    << (t.cluster ? "one cluster per direction (distributed shared memory), " : "") << "batch tile "
    << t.batch_tile << ", " << registers_ << " registers/thread, " << kilobytes(shared_bytes())
    << " shared memory/CTA, workspace " << kilobytes(workspace_bytes());
  if (fallback_plan_) s << "; fallback: " << fallback_plan_->describe();
  return s.str();
}

bool directions_in_turn_faster(const PersistentRnnPlan& both, const PersistentRnnPlan& one) {
  DS2_CHECK(both.fits() && one.fits() && both.directions() == 2 && one.directions() == 1,
            "directions_in_turn_faster: needs a fitting two-direction and one-direction plan");
  if (both.tiling().tensor_cores || !one.tiling().tensor_cores) return false;
  // H200, us a step for both directions, forward, in one launch (fp32-math) against one after the
  // other (tensor cores), `ds2 bench rnn`'s both-directions line (session 55, before bf16
  // fragments in shared memory put both directions of H 2113-2560 on tensor cores; H 2752 batch 16
  // since: 22.30 against 7.22): bf16 H 2176-2560 batch 1 3.02-3.42 against 5.12-5.26 (batch 1 and
  // 64: twice one direction's), batch 2 3.82-4.31 against 5.04-5.19, batch 3 5.77-6.27 against
  // 5.05-5.20, batch 4 5.75-6.29 against 5.07-5.41, batch 16 18.6-20.3 against 7.0-7.2, batch 64
  // 70-76 against 22-23; fp32 H 2112 batch 1 2.94 against 3.12, batch 2 3.52 / 3.90
  // (backward-data) against 3.18 / 3.21, H 2176-2304 batch 2 3.78-3.81 / 4.26-4.28 against
  // 3.79-3.86 / 3.90-4.00, H 1536-2048 batch 8 5.37-7.06 against 3.12-4.03, H 1024 batch 16 6.12
  // against 2.70. Wherever both plans were on tensor cores, or neither, one launch was the faster.
  return both.max_batch() >= (both.precision() == Precision::kBf16 ? 3 : 2);
}

int PersistentRnnPlan::max_hidden(int max_batch, int directions, int device, Precision precision,
                                  bool streamed) {
  PersistentRnnKernels allowed;
  allowed.streamed_rows = streamed;
  int best = 0;
  // Every size the kernels can hold: 1024 threads of two 4-column chunks each (8192 columns).
  // Rounding of rows per CTA makes "fits" not quite monotone in H, so every multiple of 32 is
  // tried.
  for (int h = 32; h <= 8192; h += 32) {
    PersistentRnnPlan plan(h, max_batch, directions, device, precision, allowed);
    if (plan.fits()) best = h;
  }
  return best;
}

bool tensor_tiling_runs(const kernels::PrnnTiling& c, size_t smem_optin, int sm_count,
                        int* registers) {
  if (!kernels::prnn_has_kernel(c) || kernels::prnn_shared_bytes(c) > smem_optin) return false;
  const kernels::PrnnKernelInfo info = kernels::prnn_kernel_info(c);
  const bool resident = c.cluster ? info.max_clusters >= c.directions
                                  : int64_t{info.blocks_per_sm} * sm_count >= c.ctas();
  if (info.local_bytes > kernels::prnn_mma_allowed_local_bytes(c) || info.blocks_per_sm < 1 ||
      !resident)
    return false;
  *registers = info.registers;
  return true;
}

size_t rerun_workspace_offset(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

std::string kilobytes(size_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << bytes / 1024.0 << " KB";
  return s.str();
}

void check_persistent_launch(const char* kernel, const char* what, bool fits,
                             const std::string& why_not, int B, int max_batch,
                             size_t workspace_bytes, size_t needed_bytes, int plan_device) {
  DS2_CHECK(fits, kernel << " " << what << ": " << why_not);
  DS2_CHECK(B <= max_batch, kernel << " " << what << ": batch " << B
                                   << " exceeds the plan's maximum batch " << max_batch);
  DS2_CHECK(workspace_bytes >= needed_bytes, kernel << " " << what << ": workspace of "
                                                    << workspace_bytes << " bytes, the plan needs "
                                                    << needed_bytes);
  int device = 0;
  DS2_CUDA_CHECK(cudaGetDevice(&device));
  DS2_CHECK(device == plan_device, kernel << " " << what << ": plan made for device " << plan_device
                                          << ", called on device " << device);
}

void check_persistent_call(const char* kernel, const char* what, bool fits,
                           const std::string& why_not, int B, int max_batch, size_t workspace_bytes,
                           size_t needed_bytes, int plan_device, float clip) {
  check_persistent_launch(kernel, what, fits, why_not, B, max_batch, workspace_bytes, needed_bytes,
                          plan_device);
  DS2_CHECK(clip > 0.0f, kernel << ": relu clip must be positive, got " << clip);
}

void to_kernel_directions(const PersistentRnnDirection* dirs, int n, int hidden,
                          kernels::PrnnDirection* out) {
  for (int i = 0; i < n; ++i) {
    out[i].u = dirs[i].u;
    out[i].x = dirs[i].x;
    out[i].ld_x = dirs[i].ld_x;
    out[i].h = dirs[i].h;
    out[i].ld_h = hidden;
    out[i].y = dirs[i].y;
    out[i].ld_y = dirs[i].ld_y;
    out[i].reverse = dirs[i].reverse;
    out[i].layout = dirs[i].layout;
  }
}

namespace {

void launch(const PersistentRnnPlan& plan, bool backward, const PersistentRnnDirection* dirs,
            const int* lengths, int T, int B, float clip, void* workspace, size_t workspace_bytes,
            cudaStream_t stream) {
  check_persistent_call("persistent RNN", backward ? "backward-data" : "forward", plan.fits(),
                        plan.why_not(), B, plan.max_batch(), workspace_bytes,
                        plan.workspace_bytes(), plan.device(), clip);
  kernels::PrnnDirection k[2];
  to_kernel_directions(dirs, plan.directions(), plan.hidden(), k);
  const PersistentRnnPlan* fallback = plan.fallback();
  if (fallback == nullptr) {
    kernels::prnn_launch(plan.tiling(), backward, k, lengths, T, B, clip, workspace, stream);
    return;
  }
  // The fp16 split: its forward holds the clipped state only up to kPrnnHalfSplitMaxClip, and
  // its backward-data may overflow fp16 even scaled; the fp32-math fallback runs then, the latter
  // decided on the device (it reads the split's overflow word as it starts).
  void* fallback_ws = static_cast<char*>(workspace) + plan.fallback_workspace_offset();
  if (!backward && clip > kernels::kPrnnHalfSplitMaxClip) {
    kernels::prnn_launch(fallback->tiling(), false, k, lengths, T, B, clip, fallback_ws, stream);
    return;
  }
  kernels::prnn_launch(plan.tiling(), backward, k, lengths, T, B, clip, workspace, stream);
  if (backward)
    kernels::prnn_launch(fallback->tiling(), true, k, lengths, T, B, clip, fallback_ws, stream,
                         kernels::prnn_mma_overflow_flag(plan.tiling(), workspace));
}

}  // namespace

void persistent_rnn_forward(const PersistentRnnPlan& plan, const PersistentRnnDirection* dirs,
                            const int* lengths, int T, int B, float relu_clip, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream) {
  launch(plan, false, dirs, lengths, T, B, relu_clip, workspace, workspace_bytes, stream);
}

void persistent_rnn_backward_data(const PersistentRnnPlan& plan, const PersistentRnnDirection* dirs,
                                  const int* lengths, int T, int B, float relu_clip,
                                  void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  launch(plan, true, dirs, lengths, T, B, relu_clip, workspace, workspace_bytes, stream);
}

void persistent_rnn_forward(const PersistentRnnPlan& plan, const float* u, const float* pre,
                            int64_t ld_pre, float* h_out, const int* lengths, int T, int B,
                            bool reverse, float relu_clip, void* workspace, size_t workspace_bytes,
                            cudaStream_t stream) {
  DS2_CHECK(plan.directions() == 1,
            "persistent RNN forward: one direction given to a plan for " << plan.directions());
  PersistentRnnDirection d;
  d.u = u;
  d.x = pre;
  d.ld_x = ld_pre;
  d.y = h_out;
  d.ld_y = plan.hidden();
  d.reverse = reverse;
  launch(plan, false, &d, lengths, T, B, relu_clip, workspace, workspace_bytes, stream);
}

void persistent_rnn_backward_data(const PersistentRnnPlan& plan, const float* u, const float* h,
                                  const float* dh_from_above, int64_t ld_dh, float* dpre_out,
                                  int64_t ld_dpre, const int* lengths, int T, int B, bool reverse,
                                  float relu_clip, void* workspace, size_t workspace_bytes,
                                  cudaStream_t stream) {
  DS2_CHECK(plan.directions() == 1, "persistent RNN backward-data: one direction given to a "
                                        << "plan for " << plan.directions());
  PersistentRnnDirection d;
  d.u = u;
  d.x = dh_from_above;
  d.ld_x = ld_dh;
  d.h = h;
  d.y = dpre_out;
  d.ld_y = ld_dpre;
  d.reverse = reverse;
  launch(plan, true, &d, lengths, T, B, relu_clip, workspace, workspace_bytes, stream);
}

}  // namespace ds2
