#include "nn/cuda/bench_rnn.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <sstream>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "core/cuda/device_tensor.h"
#include "core/cuda/gemm.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/elementwise.h"
#include "kernels/rnn.h"
#include "nn/cuda/bench_gru.h"
#include "nn/cuda/bench_table.h"
#include "nn/cuda/bench_timing.h"
#include "nn/cuda/gemm_recurrence.h"
#include "nn/cuda/persistent_rnn.h"
#include "nn/cuda/sparse_persistent_rnn.h"

#ifdef DS2_HAVE_CUDNN
#include "nn/cuda/cudnn_rnn_support.h"
#endif

namespace ds2 {
namespace {

constexpr float kClip = 20.0f;  // DS2's clip; the bench's states stay far below it

using Row = BenchRow;

#ifdef DS2_HAVE_CUDNN

struct CudnnOutputs {
  std::vector<float> y, dx;
  bool linear_input = false;
};

// One algorithm and math mode: h_t = relu(x_t + R h_{t-1}) with R = U (CUDNN_SKIP_INPUT: x is the
// pre-activation, as ours), or with CUDNN_LINEAR_INPUT and W = I where skip-input is refused
// (then cuDNN's time includes an extra input GEMM, said in the note).
// `dtype` is the element type of x, dy, the weights and the outputs (x and dy already in it on the
// device); the math accumulates in fp32 (mathPrec FLOAT) in every case.
void run_cudnn(CudnnShared& c, Row& row, CudnnOutputs& out, cudnnRNNAlgo_t algo,
               cudnnMathType_t math, cudnnDataType_t dtype, const std::vector<float>& u,
               const void* x, const void* dy, int H, int B, int T, int warmup, int repeats,
               cudaStream_t stream) {
  // The persistent algorithms may refuse a layer without biases or with skip-input: try the
  // other forms (biases stay zero: the weight buffer is zero-filled), the closest to ours first.
  const cudnnRNNBiasMode_t bias_modes[] = {CUDNN_RNN_NO_BIAS, CUDNN_RNN_SINGLE_INP_BIAS,
                                           CUDNN_RNN_DOUBLE_BIAS};
  for (int attempt = 0; attempt < 6; ++attempt) {
    const bool linear = attempt % 2 == 1;
    const cudnnRNNBiasMode_t bias_mode = bias_modes[attempt / 2];
    try {
      CudnnRnn r(c, algo, bias_mode, linear ? CUDNN_LINEAR_INPUT : CUDNN_SKIP_INPUT, dtype, math, H,
                 /*layers=*/1, B, stream);
      const int64_t n16 = (int64_t{T} * B * H * static_cast<int64_t>(element_bytes(dtype)) + 3) / 4;
      DeviceArray<float> y(n16), dx(n16), matrix;
      // R = U (linLayerID 1, row-major {H, H} like PyTorch's weight_hh); W = I if present.
      for (int id = 0; id < 2; ++id) {
        void* m_addr = nullptr;
        void* b_addr = nullptr;
        const cudnnStatus_t st = cudnnGetRNNWeightParams(
            c.handle, r.rnn, 0, r.weight_bytes, r.weights.data(), id, r.m, &m_addr, r.b, &b_addr);
        if (id == 0 && (st != CUDNN_STATUS_SUCCESS || !m_addr)) continue;  // no W (skip-input)
        DS2_CUDNN_CHECK(st);
        DS2_CHECK(m_addr != nullptr, "cuDNN gave no recurrent matrix");
        if (id == 1) {
          upload_as(u, dtype, matrix, stream);
        } else {
          std::vector<float> eye(int64_t{H} * H, 0.0f);
          for (int i = 0; i < H; ++i) eye[int64_t{i} * H + i] = 1.0f;
          upload_as(eye, dtype, matrix, stream);
        }
        DS2_CUDA_CHECK(cudaMemcpyAsync(m_addr, matrix.data(), element_bytes(dtype) * H * H,
                                       cudaMemcpyDeviceToDevice, stream));
      }
      auto forward = [&] { r.forward(c, x, y.data()); };
      auto backward = [&] { r.backward_data(c, y.data(), dy, dx.data()); };
      row.note.clear();  // an earlier attempt's, where its timing threw
      if (linear) row.add_note("skip-input refused: time includes an input GEMM with W = I");
      if (bias_mode != CUDNN_RNN_NO_BIAS) row.add_note("with (zero) biases: no-bias refused");
      // Repeated backward-data calls without a forward between them gave a dx 0.9-1.0 (scaled)
      // away from ours at every shape: cuDNN's backward-data writes into the reserve space that the
      // next one reads. time_rnn_row ends on one forward and one backward-data.
      time_rnn_row(row, stream, warmup, repeats, T, forward, backward);
      out.y = download_as(y.data(), int64_t{T} * B * H, dtype, stream);
      out.dx = download_as(dx.data(), int64_t{T} * B * H, dtype, stream);
      out.linear_input = linear;
      return;
    } catch (const Error& e) {
      (void)cudaGetLastError();
      if (attempt == 5) {
        row.fwd_us = row.bwd_us = -1.0;
        row.note = std::string("n/a: ") + e.what();
      }
    }
  }
}

#endif  // DS2_HAVE_CUDNN

}  // namespace

std::string run_rnn_bench(const RnnBenchOptions& o) {
  if (o.cell == "gru") return run_gru_bench(o);
  DS2_CHECK(o.cell == "relu", "bench rnn: --cell must be relu or gru, got '" << o.cell << "'");
  DS2_CHECK(o.hidden > 0 && o.batch > 0 && o.steps > 0 && o.repeats > 0 && o.warmup >= 0,
            "bench rnn: --hidden, --batch, --steps and --repeats must be positive");
  const Precision precision = parse_precision(o.precision);
  const bool bf16 = precision == Precision::kBf16;
  const int H = o.hidden, B = o.batch, T = o.steps;
  CudaContext ctx(o.device);
  cudaStream_t s = ctx.stream();
  std::ostringstream rep;
  DS2_CHECK(o.density > 0.0 && o.density <= 1.0,
            "bench rnn: --density must be in (0, 1], got " << o.density);
  rep << "ds2 bench rnn: hidden " << H << ", batch " << B << ", " << T << " steps, " << o.precision
      << ", one direction, clipped ReLU";
  if (o.density < 1.0) rep << ", recurrent density " << o.density << " (random mask)";
  rep << "; " << ctx.description() << "\n";

  // Inputs: U ~ U(-1/sqrt(H), 1/sqrt(H)) (the layer's init), pre-activations and dL/dh ~ U(-1, 1)
  // (never zeros), every utterance T frames long.
  Rng rng(1234);
  const int64_t n = int64_t{T} * B * H;
  const float a = 1.0f / std::sqrt(static_cast<float>(H));
  std::vector<float> hu(int64_t{H} * H), hx(n), hdy(n);
  for (auto& v : hu) v = rng.uniform(-a, a);
  // --density D: a random mask keeps each weight with probability D; every row then runs the
  // masked U (dense rows too: the sparse kernel is compared with the best dense option on the
  // same matrix).
  std::vector<uint8_t> mask;
  if (o.density < 1.0) {
    mask.resize(hu.size());
    for (size_t i = 0; i < hu.size(); ++i) {
      mask[i] = rng.uniform(0.0f, 1.0f) < o.density ? 1 : 0;
      if (!mask[i]) hu[i] = 0.0f;
    }
  }
  for (auto& v : hx) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : hdy) v = rng.uniform(-1.0f, 1.0f);
  // The GEMM recurrence's states, zero state and dpre with the rows its padded steps read past
  // their ends (gemm_recurrence_extra_rows).
  const int64_t extra = int64_t{gemm_recurrence_extra_rows(B, 1, H, bf16)} * H;
  DeviceArray<float> u(int64_t{H} * H), x(n), dy(n), h(n), dpre(n), pre_work(n), hg(n + extra),
      dpre_g(n + extra);
  DeviceArray<float> zero(int64_t{B} * H + extra), carry(gemm_recurrence_carry_size(B, 1, H, bf16)),
      next(gemm_recurrence_carry_size(B, 1, H, bf16));
  DeviceArray<int> lengths(B);
  upload(hu.data(), hu.size(), u.data(), s);
  upload(hx.data(), n, x.data(), s);
  upload(hdy.data(), n, dy.data(), s);
  kernels::fill(zero.data(), zero.capacity(), 0.0f, s);
  const std::vector<int> host_lengths(B, T);
  DS2_CUDA_CHECK(cudaMemcpyAsync(lengths.data(), host_lengths.data(), B * sizeof(int),
                                 cudaMemcpyHostToDevice, s));
  std::vector<Row> rows;

  // Ours, persistent.
  Row persistent(std::string("ours: persistent kernel (") + o.precision + ")");
  PersistentRnnPlan plan(H, B, 1, o.device, precision);
  rep << "plan: " << plan.describe() << "\n";
  for (const Precision p : {Precision::kFp32, Precision::kBf16})
    rep << "largest hidden size that runs persistently at this batch, " << precision_name(p)
        << " weights: " << PersistentRnnPlan::max_hidden(B, 1, o.device, p)
        << " on chip (both directions in one launch: "
        << PersistentRnnPlan::max_hidden(B, 2, o.device, p) << "), "
        << PersistentRnnPlan::max_hidden(B, 1, o.device, p, true)
        << " one direction with rows streamed from L2\n";
  std::vector<float> h_ours, dpre_ours;
  // Times the forward and backward-data of `directions` directions into `row` (per step, for all
  // of them): in one launch where p has them all, else one launch per direction on p, one after
  // the other; direction d's outputs stay at h_out + d n and dpre_out + d n.
  auto time_plan = [&](const PersistentRnnPlan& p, Row& row, float* h_out, float* dpre_out,
                       int directions = 1) {
    DeviceArray<float> ws(static_cast<int64_t>(p.workspace_bytes() / sizeof(float) + 1));
    const size_t ws_bytes = static_cast<size_t>(ws.capacity()) * sizeof(float);
    PersistentRnnDirection fwd[2], bwd[2];
    for (int d = 0; d < directions; ++d) {
      fwd[d].u = bwd[d].u = u.data();
      fwd[d].x = x.data();
      bwd[d].x = dy.data();
      fwd[d].ld_x = bwd[d].ld_x = H;
      fwd[d].y = h_out + d * n;
      bwd[d].h = h_out + d * n;
      bwd[d].y = dpre_out + d * n;
      fwd[d].ld_y = bwd[d].ld_y = H;
      fwd[d].reverse = bwd[d].reverse = d == 1;
    }
    const int per_launch = p.directions();
    auto forward = [&] {
      for (int d = 0; d < directions; d += per_launch)
        persistent_rnn_forward(p, fwd + d, lengths.data(), T, B, kClip, ws.data(), ws_bytes, s);
    };
    auto backward = [&] {
      for (int d = 0; d < directions; d += per_launch)
        persistent_rnn_backward_data(p, bwd + d, lengths.data(), T, B, kClip, ws.data(), ws_bytes,
                                     s);
    };
    time_rnn_row(row, s, o.warmup, o.repeats, T, forward, backward);
  };
  Row grid_row(std::string("ours: persistent, grid-wide (") + o.precision + ")");
  Row other_row("");
  if (plan.fits()) {
    // Beside the kernel the plan picked, in the same run: the grid-wide kernel when it picked the
    // cluster or the single-CTA one; the cluster or step-barrier kernel when it picked the tagged
    // one.
    if (plan.tiling().cluster || plan.tiling().single_cta) {
      PersistentRnnKernels grid_wide{false};
      grid_wide.single_cta = false;
      const PersistentRnnPlan grid(H, B, 1, o.device, precision, grid_wide);
      if (grid.fits()) time_plan(grid, grid_row, h.data(), dpre.data());
    }
    if (plan.tiling().tagged_exchange) {
      const PersistentRnnPlan other(H, B, 1, o.device, precision, kClusterBeforeGrid);
      other_row.name = std::string("ours: persistent, ") +
                       (other.tiling().cluster ? "cluster" : "step barrier") + " (" + o.precision +
                       ")";
      if (other.fits()) time_plan(other, other_row, h.data(), dpre.data());
    }
    time_plan(plan, persistent, h.data(), dpre.data());
    h_ours = download_vector(h.data(), n, s);
    dpre_ours = download_vector(dpre.data(), n, s);
  } else {
    persistent.note = "does not fit";
  }
  rows.push_back(persistent);
  if (grid_row.fwd_us > 0) rows.push_back(grid_row);
  // A bidirectional layer runs both directions in one launch, the SMs split between them, or one
  // after the other where that is faster or the one launch does not fit
  // (directions_in_turn_faster): both timed, and which the layer runs, on a line of its own (the
  // times are for both directions; the table's columns are per direction).
  std::string both_directions;
  if (plan.fits()) {
    DeviceArray<float> hb(2 * n), db(2 * n);
    Row in_turn("");
    time_plan(plan, in_turn, hb.data(), db.data(), 2);
    const PersistentRnnPlan bi(H, B, 2, o.device, precision);
    Row both("");
    if (bi.fits()) time_plan(bi, both, hb.data(), db.data(), 2);
    both_directions = both_directions_line(
        persistent, in_turn, bi.fits() ? &both : nullptr,
        bi.fits() && directions_in_turn_faster(bi, plan) ? "one after the other" : "one launch",
        bi.fits() ? bi.describe() : bi.why_not());
  }
  if (other_row.fwd_us > 0) rows.push_back(other_row);

  // Ours, sparse persistent (with --density): only the kept weights on chip.
  if (!mask.empty()) {
    Row sparse(std::string("ours: sparse persistent (") + o.precision + ")");
    sparse.sparse = true;
    const int fullest = max_row_nonzeros(mask.data(), H);
    SparsePersistentRnnPlan splan(H, B, fullest, 1, o.device, precision);
    rep << "sparse plan: " << splan.describe() << "\n";
    if (splan.fits())
      rep << "sparse slots / dense weights: " << fmt_fixed(sparse_work_ratio(splan), 3)
          << " (a layer prefers sparse: " << (prefer_sparse(splan, &plan) ? "yes" : "no") << ")\n";
    for (const Precision p : {Precision::kFp32, Precision::kBf16})
      rep << "largest hidden size that runs sparse persistently at this batch and density, "
          << precision_name(p)
          << " weights: " << SparsePersistentRnnPlan::max_hidden(B, o.density, 1, o.device, p)
          << "\n";
    if (splan.fits()) {
      SparseRnnLayoutStats stats;
      const std::vector<uint32_t> fwd_words = splan.layout(mask.data(), false, &stats);
      const std::vector<uint32_t> bwd_words = splan.layout(mask.data(), true);
      rep << "sparse layout: " << stats.nonzeros << " kept weights, " << stats.padding_slots
          << " padding slots, " << stats.extra_wavefronts << " bank-conflict wavefronts in "
          << stats.phases << " gather phases\n";
      DeviceArray<int> words(static_cast<int64_t>(fwd_words.size() + bwd_words.size()));
      DS2_CUDA_CHECK(cudaMemcpyAsync(words.data(), fwd_words.data(),
                                     fwd_words.size() * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                     s));
      DS2_CUDA_CHECK(cudaMemcpyAsync(words.data() + fwd_words.size(), bwd_words.data(),
                                     bwd_words.size() * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                     s));
      DeviceArray<float> ws(static_cast<int64_t>(splan.workspace_bytes() / sizeof(float) + 1));
      const size_t ws_bytes = static_cast<size_t>(ws.capacity()) * sizeof(float);
      DeviceArray<float> hs(n), dps(n);
      PersistentRnnDirection fd{
          u.data(),  x.data(), H,     nullptr,
          hs.data(), H,        false, reinterpret_cast<const uint32_t*>(words.data())};
      PersistentRnnDirection bd{
          u.data(),   dy.data(),
          H,          plan.fits() ? h.data() : hs.data(),
          dps.data(), H,
          false,      reinterpret_cast<const uint32_t*>(words.data()) + fwd_words.size()};
      auto forward = [&] {
        sparse_persistent_rnn_forward(splan, &fd, lengths.data(), T, B, kClip, ws.data(), ws_bytes,
                                      s);
      };
      auto backward = [&] {
        sparse_persistent_rnn_backward_data(splan, &bd, lengths.data(), T, B, kClip, ws.data(),
                                            ws_bytes, s);
      };
      time_rnn_row(sparse, s, o.warmup, o.repeats, T, forward, backward);
      if (plan.fits()) {
        std::ostringstream note;
        note << "check vs persistent: h " << std::scientific << std::setprecision(1)
             << scaled_max_diff(download_vector(hs.data(), n, s), h_ours) << ", dpre "
             << scaled_max_diff(download_vector(dps.data(), n, s), dpre_ours);
        sparse.add_note(note.str());
      }
    } else {
      sparse.note = "does not fit";
    }
    rows.insert(rows.begin(), sparse);
  }

  // Ours, the GEMM RNN: CudaRnnLayer's per-step loop (nn/cuda/gemm_recurrence.h), its GEMMs at the
  // layer's precision as the layer runs them (bf16: U rounded once, each state and gradient by the
  // step kernel that writes it, fp32 sums).
  Row gemm_row(std::string("ours: GEMM RNN (") + o.precision +
               " GEMMs, cuBLAS/step, one CUDA graph)");
  if (gemm_recurrence_fuses_relu_forward(B, H, bf16))
    gemm_row.add_note("forward: one fused kernel a step (kernels/rnn_fused_step.h)");
  if (!o.ours_only) {
    GemmRecurrenceBf16 ops(bf16, u.data(), 1, H, T, B, s);
    const GemmRecurrence r{ctx.cublas(), s, u.data(), ops.u(), H, B, lengths.data(), ops.product()};
    auto restore = [&] {
      DS2_CUDA_CHECK(cudaMemcpyAsync(pre_work.data(), x.data(), n * sizeof(float),
                                     cudaMemcpyDeviceToDevice, s));
    };
    auto forward = [&] {
      for (int t = 0; t < T; ++t) {
        const float* hp = t == 0 ? zero.data() : hg.data() + int64_t{t - 1} * B * H;
        kernels::RnnStepPrefetch next;
        if (t + 1 < T) next.pre = pre_work.data() + int64_t{t + 1} * B * H;
        relu_gemm_step_forward(r, t, B, hp, ops.state_before(t - 1),
                               pre_work.data() + int64_t{t} * B * H, H,
                               hg.data() + int64_t{t} * B * H, ops.state(t), kClip, next);
      }
    };
    // Backward-data reads the persistent kernel's h when there is one (the same masks).
    const float* hb = plan.fits() ? h.data() : hg.data();
    auto backward = [&] {
      float* c = carry.data();
      float* nx = next.data();
      kernels::fill(c, carry.capacity(), 0.0f, s);
      for (int t = T - 1; t >= 0; --t) {
        kernels::RnnStepPrefetch next_step;
        if (t > 0) {
          next_step.state = hb + int64_t{t - 1} * B * H;
          next_step.dy = dy.data() + int64_t{t - 1} * B * H;
        }
        relu_gemm_step_backward(r, t, B, hb + int64_t{t} * B * H, dy.data() + int64_t{t} * B * H, c,
                                dpre_g.data() + int64_t{t} * B * H, H, ops.step_grad(), nx, kClip,
                                next_step);
        std::swap(c, nx);
      }
    };
    time_rnn_row(gemm_row, s, o.warmup, o.repeats, T, forward, backward, restore);
    if (plan.fits()) {
      std::ostringstream note;
      note << "check vs persistent: h " << std::scientific << std::setprecision(1)
           << scaled_max_diff(download_vector(hg.data(), n, s), h_ours) << ", dpre "
           << scaled_max_diff(download_vector(dpre_g.data(), n, s), dpre_ours);
      gemm_row.add_note(note.str());
    }
    rows.push_back(gemm_row);
  }

#ifdef DS2_HAVE_CUDNN
  if (!o.ours_only) {
    const int version = static_cast<int>(cudnnGetVersion());
    rep << "cuDNN " << version / 10000 << "." << (version / 100) % 100 << "." << version % 100
        << ": CUDNN_RNN_RELU, unidirectional, no bias, fp32 accumulation; "
        << (bf16 ? "16-bit data and weights (bf16, or fp16 where cuDNN refuses bf16), tensor-op "
                   "math; the 16-bit rows are the reference for 'x cuDNN'\n"
                 : "fp32 data; 'fp32' rows use CUDNN_FMA_MATH (no TF32, as ours), 'default "
                   "math' rows may use TF32\n");
    rep << "cuDNN's calls and our GEMM recurrence's steps are each replayed as one CUDA graph, as "
           "the layers replay theirs (no launch from the host timed)\n";
    const std::pair<cudnnRNNAlgo_t, const char*> algos[] = {
        {CUDNN_RNN_ALGO_STANDARD, "STANDARD"},
        {CUDNN_RNN_ALGO_PERSIST_STATIC, "PERSIST_STATIC"},
        {CUDNN_RNN_ALGO_PERSIST_DYNAMIC, "PERSIST_DYNAMIC"}};
    struct Variant {
      cudnnDataType_t dtype;
      cudnnMathType_t math;
      bool reference;
    };
    std::vector<Variant> variants;
    if (bf16) {
      variants = {{CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_OP_MATH, true},
                  {CUDNN_DATA_HALF, CUDNN_TENSOR_OP_MATH, true}};
    } else {
      variants = {{CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, true},
                  {CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, false}};
    }
    for (const Variant& v : variants) {
      CudnnShared c;
      setup_cudnn(c, s, H, B, T, v.dtype, 1);
      DeviceArray<float> x16, dy16;
      upload_as(hx, v.dtype, x16, s);
      upload_as(hdy, v.dtype, dy16, s);
      for (const auto& [algo, name] : algos) {
        std::string label = std::string("cuDNN ") + name + " (" + dtype_name(v.dtype);
        if (v.dtype == CUDNN_DATA_FLOAT) label += v.math == CUDNN_FMA_MATH ? "" : ", default math";
        Row row(label + ")");
        row.reference = v.reference;
        CudnnOutputs out;
        run_cudnn(c, row, out, algo, v.math, v.dtype, hu, x16.data(), dy16.data(), H, B, T,
                  o.warmup, o.repeats, s);
        if (row.fwd_us >= 0 && plan.fits()) {
          std::ostringstream note;
          if (!row.note.empty()) note << row.note << "; ";
          note << "check vs persistent: h " << std::scientific << std::setprecision(1)
               << scaled_max_diff(out.y, h_ours) << ", dx " << scaled_max_diff(out.dx, dpre_ours);
          row.note = note.str();
        }
        rows.push_back(row);
      }
    }
  }
#else
  if (!o.ours_only) rep << "cuDNN: not in this build (CMake did not find it), no cuDNN rows\n";
#endif
  if (o.ours_only) rep << "--ours-only: no GEMM recurrence or cuDNN rows\n";

  rep << bench_table(rows, 2.0 * B * double(H) * H, "2 B H^2", o.repeats, o.warmup, 38);
  rep << both_directions;
  if (!mask.empty() && rows.front().fwd_us > 0) {
    // The yardstick: the sparse kernel against the best dense option on the same
    // matrix, whichever it is (ours persistent or GEMM, or any reference cuDNN algorithm).
    const Row* best[2] = {nullptr, nullptr};
    for (const Row& r : rows) {
      if (r.sparse || !(r.reference || r.name.rfind("ours", 0) == 0)) continue;
      if (r.fwd_us > 0 && (!best[0] || r.fwd_us < best[0]->fwd_us)) best[0] = &r;
      if (r.bwd_us > 0 && (!best[1] || r.bwd_us < best[1]->bwd_us)) best[1] = &r;
    }
    const Row& sp = rows.front();
    if (best[0] && best[1])
      rep << "sparse vs the best dense option: forward "
          << fmt_fixed(best[0]->fwd_us / sp.fwd_us, 2) << "x (" << best[0]->name
          << "), backward-data " << fmt_fixed(best[1]->bwd_us / sp.bwd_us, 2) << "x ("
          << best[1]->name << ")\n";
  }
  return rep.str();
}

}  // namespace ds2
