#include "nn/cuda/sparse_persistent_rnn.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "core/cuda/check.h"
#include "core/cuda/device_query.h"
#include "core/error.h"

namespace ds2 {
namespace {

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// The smallest slot count with a kernel that holds `needed`, or 0.
int slots_for(int needed) {
  for (int s : kernels::kSprnnSlotCounts)
    if (s >= needed) return s;
  return 0;
}

}  // namespace

SparsePersistentRnnPlan::SparsePersistentRnnPlan(int hidden, int max_batch, int max_row_nonzeros,
                                                 int directions, int device, Precision precision) {
  DS2_CHECK(hidden > 0 && max_batch > 0 && (directions == 1 || directions == 2) &&
                max_row_nonzeros >= 0 && max_row_nonzeros <= hidden,
            "sparse persistent RNN plan: hidden "
                << hidden << ", max batch " << max_batch << ", directions " << directions
                << ", fullest row " << max_row_nonzeros << " out of range");
  if (device < 0) DS2_CUDA_CHECK(cudaGetDevice(&device));
  device_ = device;
  max_row_nonzeros_ = max_row_nonzeros;
  DeviceGuard guard(device);
  sm_count_ = device_attribute(cudaDevAttrMultiProcessorCount, device);
  const int max_threads = device_attribute(cudaDevAttrMaxThreadsPerBlock, device);
  const size_t smem_optin = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device);

  kernels::SprnnTiling& t = tiling_;
  t.hidden = hidden;
  t.max_batch = max_batch;
  t.directions = directions;
  t.bf16_weights = precision == Precision::kBf16;
  t.batch_tile = max_batch == 1 ? 1 : 4;

  auto refuse = [&](const std::string& why) {
    std::ostringstream s;
    s << "sparse persistent RNN (hidden " << hidden << ", batch " << max_batch << ", fullest row "
      << max_row_nonzeros << " weights, " << precision_name(precision) << ", " << directions
      << (directions == 1 ? " direction" : " directions in one launch") << ") does not fit on "
      << device_name(device) << " (" << sm_count_ << " SMs): " << why;
    fits_ = false;
    why_not_ = s.str();
  };
  if (device_attribute(cudaDevAttrCooperativeLaunch, device) == 0) {
    refuse("the device has no cooperative launches");
    return;
  }
  if (hidden > kSparseMaxHidden) {
    refuse("columns are stored in 16 bits");
    return;
  }
  const int ctas_max = sm_count_ / directions;  // one CTA per SM: co-resident by construction
  if (ctas_max < 1) {
    refuse("fewer SMs than directions");
    return;
  }

  // Candidates (preference, lanes, rows, slots), tried in that order. Fewer lanes per row, each
  // with more of the row's weights, measured faster wherever a lane has enough of them to keep
  // busy; 32 lanes never won (H100, `ds2 bench rnn --density D` with each lane count
  // forced, forward us a step, 8 / 16 / 32 lanes: fp32 batch 4 H 2304 10% 2.41 / 2.66 / 3.77,
  // 30% 3.05 / 3.27 / 4.26, H 4001 10% 3.88 / 4.88 / 6.49, H 1152 10% 1.91 / 1.89 / 2.31, H 1152
  // 30% (8 lanes: 3 warps) 2.57 / 2.19 / 2.47; bf16 H 2304 10% (40 slots) 2.84 / 2.68 / 3.73, H
  // 5248 10% (80 slots) 4.32 / 5.58; kernels/NOTES.md, session 29). So: 8 lanes when a lane holds
  // at least eight_lane_slots (fp32 40, bf16 64: a bf16 slot costs its unpacking every step) and
  // the CTA has 4 warps, then 16 lanes, then 8, then 32 (one lane count per preference).
  const int eight_lane_slots = t.bf16_weights ? 64 : 40;
  auto preference = [&](int lanes, int rows, int slots) {
    if (lanes == 8) return slots >= eight_lane_slots && rows * lanes >= 128 ? 0 : 2;
    return lanes == 16 ? 1 : 3;
  };
  std::vector<std::tuple<int, int, int, int>> candidates;
  for (int lanes : {32, 16, 8}) {
    const int rows = ceil_div(ceil_div(hidden, ctas_max), 32 / lanes) * (32 / lanes);
    const int slots = slots_for(std::max(1, ceil_div(max_row_nonzeros, lanes)));
    if (slots == 0 || rows * lanes > max_threads) continue;
    candidates.emplace_back(preference(lanes, rows, slots), lanes, rows, slots);
  }
  std::sort(candidates.begin(), candidates.end());
  std::string reason = candidates.empty() ? "a row of " + std::to_string(max_row_nonzeros) +
                                                " weights needs more slots than any kernel has"
                                          : "";
  for (int pass = 0; pass < 2 && !fits_; ++pass) {
    for (const auto& [pref, lanes, rows, slots] : candidates) {
      t.lanes_per_row = lanes;
      t.rows_per_cta = rows;
      t.slots = slots;
      t.ctas_per_direction = ceil_div(hidden, rows);
      t.state_buffers = t.max_batch > t.batch_tile ? 2 : 1;
      if (t.state_buffers == 2 && kernels::sprnn_shared_bytes(t) > smem_optin) t.state_buffers = 1;
      const size_t smem = kernels::sprnn_shared_bytes(t);
      std::ostringstream s;
      if (smem > smem_optin) {
        s << "the staged state needs " << smem << " bytes of shared memory per CTA, more than the "
          << smem_optin << " allowed";
        reason = s.str();
        continue;
      }
      const kernels::PrnnKernelInfo info = kernels::sprnn_kernel_info(t);
      if (pass == 0 && info.local_bytes > 0) continue;  // spilling kernels only as a last resort
      if (info.blocks_per_sm < 1) {
        s << "a CTA of " << t.threads() << " threads (" << t.lanes_per_row << " per row) x "
          << info.registers << " registers (" << slots << " weight slots each) does not fit on "
          << "one SM";
        reason = s.str();
        continue;
      }
      registers_ = info.registers;
      fits_ = true;
      break;
    }
  }
  if (!fits_) refuse(reason.empty() ? "no kernel variant fits" : reason);
}

size_t SparsePersistentRnnPlan::workspace_bytes() const {
  return fits_ ? kernels::sprnn_workspace_bytes(tiling_) : 0;
}

size_t SparsePersistentRnnPlan::shared_bytes() const {
  return fits_ ? kernels::sprnn_shared_bytes(tiling_) : 0;
}

std::string SparsePersistentRnnPlan::describe() const {
  if (!fits_) return why_not_;
  const kernels::SprnnTiling& t = tiling_;
  std::ostringstream s;
  s << "sparse persistent RNN hidden " << t.hidden << ", batch <= " << t.max_batch
    << ", fullest row " << max_row_nonzeros_ << " weights, " << precision_name(precision())
    << " weights, " << (t.directions == 1 ? "1 direction" : "2 directions in one launch") << ": "
    << t.directions * t.ctas_per_direction << " CTAs (of " << sm_count_ << " SMs) x " << t.threads()
    << " threads, " << t.rows_per_cta << " rows per CTA, " << t.lanes_per_row << " lanes per row x "
    << t.slots << " slots, batch tile " << t.batch_tile << ", " << registers_
    << " registers/thread, " << kilobytes(shared_bytes()) << " shared memory/CTA";
  return s.str();
}

SparseRnnLayoutShape SparsePersistentRnnPlan::layout_shape() const {
  SparseRnnLayoutShape shape;
  shape.hidden = tiling_.hidden;
  shape.rows_per_cta = tiling_.rows_per_cta;
  shape.ctas = tiling_.ctas_per_direction;
  shape.lanes_per_row = tiling_.lanes_per_row;
  shape.slots = tiling_.slots;
  shape.phase_lanes = 32 / tiling_.batch_tile;
  return shape;
}

std::vector<uint32_t> SparsePersistentRnnPlan::layout(const uint8_t* mask, bool backward,
                                                      SparseRnnLayoutStats* stats) const {
  DS2_CHECK(fits_, "sparse persistent RNN layout: " << why_not_);
  return build_sparse_rnn_layout(layout_shape(), mask, backward, stats);
}

int SparsePersistentRnnPlan::expected_max_row_nonzeros(int hidden, double density) {
  const double mean = density * hidden;
  const double sd = std::sqrt(hidden * density * (1.0 - density));
  return std::min(hidden, static_cast<int>(std::ceil(mean + 4.0 * sd)));
}

int SparsePersistentRnnPlan::max_hidden(int max_batch, double density, int directions, int device,
                                        Precision precision) {
  DS2_CHECK(density > 0.0 && density <= 1.0,
            "sparse persistent RNN: density " << density << " must be in (0, 1]");
  auto fits = [&](int h) {
    return SparsePersistentRnnPlan(h, max_batch, expected_max_row_nonzeros(h, density), directions,
                                   device, precision)
        .fits();
  };
  // Coarse steps of 512 up to the first miss, then every multiple of 32 below it ("fits" is not
  // quite monotone: rows per CTA and slot counts round).
  int h = 512;
  while (h <= kSparseMaxHidden && fits(h)) h += 512;
  int best = 0;
  for (int c = std::max(32, h - 512); c < std::min(h, kSparseMaxHidden + 1); c += 32)
    if (fits(c)) best = c;
  return best;
}

double sparse_work_ratio(const SparsePersistentRnnPlan& sparse) {
  const kernels::SprnnTiling& t = sparse.tiling();
  const double slots = double(t.ctas_per_direction) * t.threads() * t.slots;
  return slots / (double(t.hidden) * t.hidden);
}

bool prefer_sparse(const SparsePersistentRnnPlan& sparse, const PersistentRnnPlan* dense) {
  if (!sparse.fits()) return false;
  // A dense plan that streams rows from L2 every step is no rival for one that holds every kept
  // weight on chip.
  if (!dense || !dense->fits() || dense->tiling().streamed_groups > 0) return true;
  return sparse_work_ratio(sparse) <= kSparseWorkRatio;
}

namespace {

void launch(const SparsePersistentRnnPlan& plan, bool backward, const PersistentRnnDirection* dirs,
            const int* lengths, int T, int B, float clip, void* workspace, size_t workspace_bytes,
            cudaStream_t stream) {
  check_persistent_call("sparse persistent RNN", backward ? "backward-data" : "forward",
                        plan.fits(), plan.why_not(), B, plan.max_batch(), workspace_bytes,
                        plan.workspace_bytes(), plan.device(), clip);
  kernels::PrnnDirection k[2];
  to_kernel_directions(dirs, plan.directions(), plan.hidden(), k);
  kernels::sprnn_launch(plan.tiling(), backward, k, lengths, T, B, clip, workspace, stream);
}

}  // namespace

void sparse_persistent_rnn_forward(const SparsePersistentRnnPlan& plan,
                                   const PersistentRnnDirection* dirs, const int* lengths, int T,
                                   int B, float relu_clip, void* workspace, size_t workspace_bytes,
                                   cudaStream_t stream) {
  launch(plan, false, dirs, lengths, T, B, relu_clip, workspace, workspace_bytes, stream);
}

void sparse_persistent_rnn_backward_data(const SparsePersistentRnnPlan& plan,
                                         const PersistentRnnDirection* dirs, const int* lengths,
                                         int T, int B, float relu_clip, void* workspace,
                                         size_t workspace_bytes, cudaStream_t stream) {
  launch(plan, true, dirs, lengths, T, B, relu_clip, workspace, workspace_bytes, stream);
}

}  // namespace ds2
