#include "nn/cuda/bench_gru.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "core/cuda/device_tensor.h"
#include "core/cuda/gemm.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/elementwise.h"
#include "kernels/rnn.h"
#include "nn/cuda/bench_table.h"
#include "nn/cuda/bench_timing.h"
#include "nn/cuda/gemm_recurrence.h"
#include "nn/cuda/persistent_gru.h"

#ifdef DS2_HAVE_CUDNN
#include "nn/cuda/cudnn_rnn_support.h"
#endif

namespace ds2 {
namespace {

using Row = BenchRow;

std::string check_note(const std::vector<float>& h, const std::vector<float>& h_ours,
                       const std::vector<float>& dx, const std::vector<float>& dx_ours) {
  std::ostringstream note;
  note << "check vs persistent: h " << std::scientific << std::setprecision(1)
       << scaled_max_diff(h, h_ours) << ", dx " << scaled_max_diff(dx, dx_ours);
  return note.str();
}

// dL/dx of a skip-input GRU from {T, B, 3H} gate gradients: the three gates' sum, {T, B, H}.
std::vector<float> input_gradient(const std::vector<float>& dpre, int64_t rows, int H) {
  std::vector<float> dx(rows * H);
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < H; ++k) {
      const float* g = &dpre[r * 3 * H];
      dx[r * H + k] = g[k] + g[H + k] + g[2 * H + k];
    }
  return dx;
}

}  // namespace

std::string run_gru_bench(const RnnBenchOptions& o) {
  DS2_CHECK(o.hidden > 0 && o.batch > 0 && o.steps > 0 && o.repeats > 0 && o.warmup >= 0,
            "bench rnn: --hidden, --batch, --steps and --repeats must be positive");
  DS2_CHECK(o.precision == "fp32" || o.precision == "bf16",
            "bench rnn --cell gru: --precision must be fp32 or bf16, not '" << o.precision << "'");
  DS2_CHECK(o.density == 1.0, "bench rnn --cell gru: --density is for --cell relu");
  const int H = o.hidden, B = o.batch, T = o.steps, GH = 3 * H;
  // bf16 as a bf16 GRU layer runs: the persistent recurrence on fp32 master weights (its passes on
  // bf16 copies where the plan has them, "plan with bf16 passes"), the GEMM recurrence on bf16
  // operands; cuDNN with 16-bit data and weights.
  const bool bf16 = o.precision == "bf16";
  CudaContext ctx(o.device);
  cudaStream_t s = ctx.stream();
  std::ostringstream rep;
  rep << "ds2 bench rnn: hidden " << H << ", batch " << B << ", " << T << " steps, " << o.precision
      << ", one direction, GRU; " << ctx.description() << "\n";
  if (bf16)
    rep << "bf16 as a bf16 layer runs it: the persistent GRU on fp32 master weights (bf16 copies "
           "for the passes its bf16 plan runs on tensor cores), the GEMM recurrence on bf16 "
           "operands\n";

  // U ~ U(-1/sqrt(H), 1/sqrt(H)) (the layer's init), x and dL/dh ~ U(-1, 1), the same x in the
  // three gates' input columns (cuDNN's skip-input), zero biases, every utterance T frames long.
  Rng rng(1234);
  const int64_t n = int64_t{T} * B * H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  std::vector<float> hu(int64_t{GH} * H), hx(n), hdy(n), ha(n * 3);
  for (auto& v : hu) v = rng.uniform(-scale, scale);
  for (auto& v : hx) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : hdy) v = rng.uniform(-1.0f, 1.0f);
  for (int64_t r = 0; r < int64_t{T} * B; ++r)
    for (int g = 0; g < 3; ++g) std::copy(&hx[r * H], &hx[r * H] + H, &ha[(r * 3 + g) * H]);
  // The GEMM recurrence's padded steps (gemm_recurrence_gemm_rows) read the zero state, its
  // states and dG past B rows, and write g's: room for them.
  const int step_rows = gemm_recurrence_row_capacity(B, 3, H, bf16);
  const int64_t extra_rows = gemm_recurrence_extra_rows(B, 3, H, bf16);
  DeviceArray<float> u(int64_t{GH} * H), bias(GH), a(3 * n), gates(3 * n), cand(n), h(n), dy(n),
      dpre(3 * n), dg(3 * n), step_g(int64_t{step_rows} * kernels::rnn_padded_ld(GH)),
      zero(int64_t{step_rows} * H), carry(gemm_recurrence_carry_size(B, 3, H, bf16)),
      next(gemm_recurrence_carry_size(B, 3, H, bf16));
  DeviceArray<int> lengths(B);
  upload(hu.data(), hu.size(), u.data(), s);
  upload(ha.data(), ha.size(), a.data(), s);
  upload(hdy.data(), n, dy.data(), s);
  kernels::fill(bias.data(), GH, 0.0f, s);
  kernels::fill(zero.data(), zero.capacity(), 0.0f, s);
  const std::vector<int> host_lengths(B, T);
  DS2_CUDA_CHECK(cudaMemcpyAsync(lengths.data(), host_lengths.data(), B * sizeof(int),
                                 cudaMemcpyHostToDevice, s));
  // The forward writes r, z, n over its input: each timed run starts from a fresh copy.
  auto restore = [&] {
    DS2_CUDA_CHECK(cudaMemcpyAsync(gates.data(), a.data(), 3 * n * sizeof(float),
                                   cudaMemcpyDeviceToDevice, s));
  };
  std::vector<Row> rows;

  Row persistent(bf16 ? "ours: persistent GRU (fp32 weights)" : "ours: persistent GRU (fp32)");
  PersistentGruPlan plan(H, B, 1, o.device);
  rep << "plan: " << plan.describe() << "\n";
  rep << "largest hidden size that runs persistently at this batch: "
      << PersistentGruPlan::max_hidden(B, 1, o.device)
      << " on chip (both directions in one launch: "
      << PersistentGruPlan::max_hidden(B, 2, o.device) << "), "
      << PersistentGruPlan::max_hidden(B, 1, o.device, true)
      << " one direction with rows streamed from L2 (up to 4096 tried)\n";
  // Times the forward and backward-data of `directions` directions into `row` (per step, for all
  // of them): in one launch where p has them all, else one launch per direction on p, one after
  // the other. Direction 0's h and dx come back in h_out, dx_out when given.
  DeviceArray<float> gates2(3 * n), cand2(n), h2(n), dpre2(3 * n), dg2(3 * n);
  auto time_plan = [&](const PersistentGruPlan& p, Row& row, std::vector<float>* h_out,
                       std::vector<float>* dx_out, int directions = 1) {
    DeviceArray<float> ws(static_cast<int64_t>(p.workspace_bytes() / sizeof(float) + 1));
    const size_t ws_bytes = static_cast<size_t>(ws.capacity()) * sizeof(float);
    kernels::PgruDirection dirs[2];
    for (int i = 0; i < directions; ++i) {
      kernels::PgruDirection& d = dirs[i];
      d.u = u.data();
      d.bias_h = bias.data();
      d.gates = i == 0 ? gates.data() : gates2.data();
      d.ld_gates = GH;
      d.candidate = i == 0 ? cand.data() : cand2.data();
      d.h = i == 0 ? h.data() : h2.data();
      d.dy = dy.data();
      d.ld_dy = H;
      d.dpre = i == 0 ? dpre.data() : dpre2.data();
      d.ld_dpre = GH;
      d.dgates = i == 0 ? dg.data() : dg2.data();
      d.reverse = i == 1;
    }
    const int per_launch = p.directions();
    auto restore_all = [&] {
      restore();
      if (directions == 2)
        DS2_CUDA_CHECK(cudaMemcpyAsync(gates2.data(), a.data(), 3 * n * sizeof(float),
                                       cudaMemcpyDeviceToDevice, s));
    };
    auto forward = [&] {
      for (int i = 0; i < directions; i += per_launch)
        persistent_gru_forward(p, dirs + i, lengths.data(), T, B, ws.data(), ws_bytes, s);
    };
    auto backward = [&] {
      for (int i = 0; i < directions; i += per_launch)
        persistent_gru_backward_data(p, dirs + i, lengths.data(), T, B, ws.data(), ws_bytes, s);
    };
    time_rnn_row(row, s, o.warmup, o.repeats, T, forward, backward, restore_all);
    if (h_out) *h_out = download_vector(h.data(), n, s);
    if (dx_out) *dx_out = input_gradient(download_vector(dpre.data(), 3 * n, s), int64_t{T} * B, H);
  };
  std::vector<float> h_ours, dx_ours;
  if (plan.fits())
    time_plan(plan, persistent, &h_ours, &dx_ours);
  else
    persistent.note = "does not fit";
  rows.push_back(persistent);
  // Where a pass runs on tensor cores, the fp32-math kernel's passes beside it in the same run.
  if (plan.fits() && (plan.forward_on_tensor_cores() || plan.backward_on_tensor_cores())) {
    const PersistentGruPlan fp32_math(H, B, 1, o.device, Precision::kFp32, false);
    Row row("ours: persistent GRU, fp32-math kernel");
    std::vector<float> h_other, dx_other;
    time_plan(fp32_math, row, &h_other, &dx_other);
    row.add_note(check_note(h_other, h_ours, dx_other, dx_ours));
    rows.push_back(row);
  }

  // bf16: the bf16 plan's passes on bf16 tensor cores (its forward wherever a kernel fits,
  // backward-data where the fp32 split's does not reach; the other pass as the fp32 plan's),
  // beside the rows above, whose "fp32 weights" row is the fp32 plan's (the split where it
  // reaches). The plan a layer of this precision runs (bf16 that one, fp32 `plan`) is the
  // one-direction plan of the both-directions line below.
  std::optional<PersistentGruPlan> bf16_plan;
  const PersistentGruPlan& layer_plan =
      bf16 ? bf16_plan.emplace(H, B, 1, o.device, Precision::kBf16) : plan;
  Row layer_row = persistent;
  if (bf16) {
    const bool fwd16 = layer_plan.pass_in_bf16(false), bwd16 = layer_plan.pass_in_bf16(true);
    if (layer_plan.fits() && (fwd16 || bwd16)) {
      rep << "plan with bf16 passes: " << layer_plan.describe() << "\n";
      Row row(std::string("ours: persistent GRU, bf16 ") + (fwd16 && bwd16 ? "both passes"
                                                            : fwd16        ? "forward"
                                                                           : "backward-data"));
      // Where the fp32 plan does not fit (a bf16 plan needs no fp32-math kernel), this row is the
      // one the others are checked against.
      if (plan.fits()) {
        std::vector<float> h_other, dx_other;
        time_plan(layer_plan, row, &h_other, &dx_other);
        row.add_note(check_note(h_other, h_ours, dx_other, dx_ours));
      } else {
        time_plan(layer_plan, row, &h_ours, &dx_ours);
      }
      rows.push_back(row);
      layer_row = row;
    }
  }

  // A bidirectional layer runs both directions in one launch or one after the other
  // (directions_in_turn_faster): both timed, on a line after the table, with the plans a layer of
  // this precision takes (bf16: its passes on bf16 tensor cores where they reach).
  std::string both_directions;
  if (plan.fits()) {
    const Precision layer_precision = bf16 ? Precision::kBf16 : Precision::kFp32;
    const PersistentGruPlan bi(H, B, 2, o.device, layer_precision);
    Row in_turn(""), both("");
    time_plan(layer_plan, in_turn, nullptr, nullptr, 2);
    if (bi.fits()) time_plan(bi, both, nullptr, nullptr, 2);
    std::string layer_runs;
    if (bi.fits()) {
      const bool forward = directions_in_turn_faster(bi, layer_plan, false);
      const bool backward = directions_in_turn_faster(bi, layer_plan, true);
      const auto way = [](bool in_turn) { return in_turn ? "one after the other" : "one launch"; };
      layer_runs = forward == backward ? way(forward)
                                       : std::string("forward ") + way(forward) +
                                             ", backward-data " + way(backward);
    }
    both_directions = both_directions_line(layer_row, in_turn, bi.fits() ? &both : nullptr,
                                           layer_runs, bi.fits() ? bi.describe() : bi.why_not());
  }

  // Ours, the GEMM recurrence: CudaRnnLayer's per-step loop (nn/cuda/gemm_recurrence.h).
  Row gemm_row(std::string("ours: GEMM GRU (") + o.precision +
               " GEMMs, cuBLAS/step, one CUDA graph)");
  if (!o.ours_only) {
    DeviceArray<float> hg(n + extra_rows * H), candg(n), dpre_g(3 * n),
        dg_g(3 * (n + extra_rows * H));
    GemmRecurrenceBf16 ops(bf16, u.data(), 3, H, T, B, s);
    const GemmRecurrence r{ctx.cublas(), s, u.data(), ops.u(), H, B, lengths.data()};
    auto forward = [&] {
      for (int t = 0; t < T; ++t) {
        const float* hp = t == 0 ? zero.data() : hg.data() + int64_t{t - 1} * B * H;
        kernels::RnnStepPrefetch next;
        if (t + 1 < T) next.pre = gates.data() + int64_t{t + 1} * B * GH;
        gru_gemm_step_forward(r, t, B, hp, ops.state_before(t - 1),
                              gates.data() + int64_t{t} * B * GH, GH, step_g.data(), bias.data(),
                              hg.data() + int64_t{t} * B * H, ops.state(t),
                              candg.data() + int64_t{t} * B * H, next);
      }
    };
    auto backward = [&] {
      float* c = carry.data();
      float* nx = next.data();
      kernels::fill(c, carry.capacity(), 0.0f, s);
      // What step t reads that the forward wrote: gates, candidate, h_prev and dy.
      const auto inputs = [&](int t) {
        kernels::RnnStepPrefetch in;
        in.pre = gates.data() + int64_t{t} * B * GH;
        in.candidate = candg.data() + int64_t{t} * B * H;
        in.state = t == 0 ? zero.data() : hg.data() + int64_t{t - 1} * B * H;
        in.dy = dy.data() + int64_t{t} * B * H;
        return in;
      };
      for (int t = T - 1; t >= 0; --t) {
        const kernels::RnnStepPrefetch in = inputs(t);
        gru_gemm_step_backward(r, t, B, in.pre, GH, in.candidate, in.state, in.dy, c,
                               dpre_g.data() + int64_t{t} * B * GH,
                               dg_g.data() + int64_t{t} * B * GH, ops.step_grad(), nx,
                               t > 0 ? inputs(t - 1) : kernels::RnnStepPrefetch{});
        std::swap(c, nx);
      }
    };
    time_rnn_row(gemm_row, s, o.warmup, o.repeats, T, forward, backward, restore);
    if (!h_ours.empty())
      gemm_row.add_note(check_note(
          download_vector(hg.data(), n, s), h_ours,
          input_gradient(download_vector(dpre_g.data(), 3 * n, s), int64_t{T} * B, H), dx_ours));
    rows.push_back(gemm_row);
  }

#ifdef DS2_HAVE_CUDNN
  if (!o.ours_only) {
    const int version = static_cast<int>(cudnnGetVersion());
    rep << "cuDNN " << version / 10000 << "." << (version / 100) % 100 << "." << version % 100
        << ": CUDNN_GRU, unidirectional, fp32 accumulation; "
        << (bf16 ? "16-bit data and weights (bf16, or fp16 where cuDNN refuses bf16), tensor-op "
                   "math; the 16-bit rows are the reference for 'x cuDNN'\n"
                 : "fp32 data; 'fp32' rows use CUDNN_FMA_MATH (no TF32, as ours; the reference "
                   "for 'x cuDNN'), 'default math' rows may use TF32\n");
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
    const std::vector<Variant> variants =
        bf16 ? std::vector<Variant>{{CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_OP_MATH, true},
                                    {CUDNN_DATA_HALF, CUDNN_TENSOR_OP_MATH, true}}
             : std::vector<Variant>{{CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, true},
                                    {CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, false}};
    // Outputs sized in whole floats hold any element type.
    DeviceArray<float> y(n), dx(n), matrix, x_dev, dy_dev;
    for (const Variant& v : variants) {
      CudnnShared c;
      setup_cudnn(c, s, H, B, T, v.dtype, 1);
      upload_as(hx, v.dtype, x_dev, s);
      upload_as(hdy, v.dtype, dy_dev, s);
      for (const auto& [algo, name] : algos) {
        std::string label = std::string("cuDNN ") + name + " (" + dtype_name(v.dtype);
        if (v.dtype == CUDNN_DATA_FLOAT) label += v.math == CUDNN_FMA_MATH ? "" : ", default math";
        Row row(label + ")");
        row.reference = v.reference;
        // Skip-input first; where refused, a linear input with W = I per gate (the time then
        // includes that input GEMM, said in the note). Biases stay zero either way.
        for (const bool linear : {false, true}) {
          try {
            CudnnRnn r(c, algo, CUDNN_RNN_DOUBLE_BIAS,
                       linear ? CUDNN_LINEAR_INPUT : CUDNN_SKIP_INPUT, v.dtype, v.math, H, 1, B, s,
                       CUDNN_GRU);
            // linLayerID 0-2: W of r, z, n; 3-5: R (= U's gate rows, {H, H} row-major each).
            for (int id = 0; id < 6; ++id) {
              void* m_addr = nullptr;
              void* b_addr = nullptr;
              const cudnnStatus_t st =
                  cudnnGetRNNWeightParams(c.handle, r.rnn, 0, r.weight_bytes, r.weights.data(), id,
                                          r.m, &m_addr, r.b, &b_addr);
              if (id < 3 && (st != CUDNN_STATUS_SUCCESS || !m_addr)) continue;  // skip-input
              DS2_CUDNN_CHECK(st);
              DS2_CHECK(m_addr != nullptr, "cuDNN gave no GRU matrix " << id);
              std::vector<float> m(int64_t{H} * H, 0.0f);
              if (id < 3) {
                for (int i = 0; i < H; ++i) m[int64_t{i} * H + i] = 1.0f;
              } else {
                const auto gate = hu.begin() + int64_t{id - 3} * H * H;
                std::copy(gate, gate + int64_t{H} * H, m.begin());
              }
              upload_as(m, v.dtype, matrix, s);
              DS2_CUDA_CHECK(cudaMemcpyAsync(m_addr, matrix.data(), element_bytes(v.dtype) * H * H,
                                             cudaMemcpyDeviceToDevice, s));
            }
            auto forward = [&] { r.forward(c, x_dev.data(), y.data()); };
            auto backward = [&] { r.backward_data(c, y.data(), dy_dev.data(), dx.data()); };
            row.note.clear();  // the skip-input attempt's "n/a", where it threw
            if (linear) row.add_note("skip-input refused: time includes an input GEMM (W = I)");
            // Checked after the pair of calls time_rnn_row ends on.
            time_rnn_row(row, s, o.warmup, o.repeats, T, forward, backward);
            if (!h_ours.empty())
              row.add_note(check_note(download_as(y.data(), n, v.dtype, s), h_ours,
                                      download_as(dx.data(), n, v.dtype, s), dx_ours));
            break;
          } catch (const Error& e) {
            (void)cudaGetLastError();
            row.fwd_us = row.bwd_us = -1.0;
            row.note = std::string("n/a: ") + e.what();
          }
        }
        rows.push_back(row);
      }
    }
  }
#else
  if (!o.ours_only) rep << "cuDNN: not in this build (CMake did not find it), no cuDNN rows\n";
#endif
  if (o.ours_only) rep << "--ours-only: no GEMM recurrence or cuDNN rows\n";

  rep << bench_table(rows, 2.0 * B * double(GH) * H, "2 B 3H^2", o.repeats, o.warmup, 42);
  rep << both_directions;
  return rep.str();
}

}  // namespace ds2
