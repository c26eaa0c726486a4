#include "nn/cuda/rnn_layer_cuda.h"

#include <algorithm>
#include <utility>

#include "core/cuda/check.h"
#include "core/cuda/gemm.h"
#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/grid.h"
#include "kernels/rnn.h"
#include "nn/cuda/recurrence_choice.h"

namespace ds2 {

namespace {

// x {rows, cols} rounded to bf16 into `out` (grown on first use, then reused) with rows
// kernels::rnn_padded_ld(cols) apart and zero padding: the operand copy a bf16 GEMM reads, which
// can then run its dimension along the rows padded (accumulate_weight_gradient_bf16).
const uint16_t* rounded_rows_to_bf16(const float* x, int64_t rows, int cols,
                                     DeviceArray<uint16_t>& out, cudaStream_t stream) {
  const int ld = kernels::rnn_padded_ld(cols);
  out.reserve(std::max<int64_t>(1, rows * ld));
  kernels::to_bf16_rows(x, rows, cols, out.data(), ld, stream);
  return out.data();
}

// A weight gradient, c {m, n} (rows n apart) += a^T b over k rows of a {k, m} and b {k, n} (bf16,
// rows lda and ldb apart). cuBLAS's bf16 GEMM runs 2.6-3.7x slower where m or n is not a multiple
// of 8 (H200, scripts/dev/bf16-gemm-pitch.sh: dU of H 1700 at 3200 rows 331 us, of H 1704 90).
// Where a and b allow it (16-byte aligned, rows of at least m and n rounded up to 8 readable),
// the product runs at the rounded dimensions into the weight-gradient scratch and is added in.
void accumulate_weight_gradient_bf16(CudaContext& ctx, cublasHandle_t handle, cudaStream_t stream,
                                     int m, int n, int k, const uint16_t* a, int lda,
                                     const uint16_t* b, int ldb, float* c) {
  const int m8 = kernels::rnn_padded_ld(m), n8 = kernels::rnn_padded_ld(n);
  const bool pad = (m8 != m || n8 != n) && lda >= m8 && ldb >= n8 && kernels::aligned_to(a, 16) &&
                   kernels::aligned_to(b, 16) && lda % 8 == 0 && ldb % 8 == 0;
  if (!pad) {
    gemm_bf16(handle, true, false, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, c, n);
    return;
  }
  float* product = ctx.weight_gradient_scratch(int64_t{m8} * n8);
  gemm_bf16(handle, true, false, m8, n8, k, 1.0f, a, lda, b, ldb, 0.0f, product, n8);
  kernels::add_rows(c, n, product, n8, m, n, stream);
}

// Whether `plan` (null: none yet) must be rebuilt for `batch` at `precision`: for a larger batch,
// another precision, or a smaller one when it did not fit (a batch too large for the chip must
// not pin the layer to GEMMs).
template <class Plan>
bool needs_replan(const Plan* plan, int batch, Precision precision) {
  return !plan || batch > plan->max_batch() || plan->precision() != precision ||
         (!plan->fits() && batch < plan->max_batch());
}

// Whether a pass of a bidirectional layer runs its directions one after the other on `one`
// rather than in one launch on `both`: the clipped ReLU's rule is one for both passes, the GRU's
// decides each (nn/cuda/persistent_rnn.h, nn/cuda/persistent_gru.h).
bool pass_in_turn_faster(const PersistentRnnPlan& both, const PersistentRnnPlan& one, bool) {
  return directions_in_turn_faster(both, one);
}
bool pass_in_turn_faster(const PersistentGruPlan& both, const PersistentGruPlan& one,
                         bool backward) {
  return directions_in_turn_faster(both, one, backward);
}

// The plans a layer's forward and backward-data run on: all `directions` in one launch, or one
// at a time where that does not fit or, for that pass, is slower (pass_in_turn_faster).
// `backward` is null where it is the forward's plan (always, for the clipped ReLU).
template <class Plan>
struct PassPlans {
  std::unique_ptr<Plan> forward, backward;
};

template <class Plan>
PassPlans<Plan> plans_for_directions(int hidden, int batch, int directions, int device,
                                     Precision precision) {
  PassPlans<Plan> p;
  p.forward = std::make_unique<Plan>(hidden, batch, directions, device, precision);
  if (directions != 2) return p;
  auto one = std::make_unique<Plan>(hidden, batch, 1, device, precision);
  if (!p.forward->fits()) {
    p.forward = std::move(one);
    return p;
  }
  if (!one->fits()) return p;
  const bool forward = pass_in_turn_faster(*p.forward, *one, false);
  const bool backward = pass_in_turn_faster(*p.forward, *one, true);
  if (forward != backward) p.backward = forward ? std::move(p.forward) : std::move(one);
  if (forward) p.forward = std::move(one);
  return p;
}

// Which recurrence a dense plan (clipped ReLU or GRU) gives a layer of `directions`, and why;
// `backward`: the backward-data's plan where it is not `forward`.
template <class Plan>
std::string recurrence_of(const Plan& forward, int directions, const Plan* backward = nullptr) {
  if (!forward.fits()) return "GEMM recurrence (" + forward.why_not() + ")";
  if (backward) {
    const auto way = [&](const Plan& p) {
      return p.directions() == directions ? "in one launch" : "one direction after the other";
    };
    return std::string("persistent recurrence, forward ") + way(forward) + ", backward-data " +
           way(*backward) + " (forward: " + forward.describe() +
           "; backward-data: " + backward->describe() + ")";
  }
  if (forward.directions() == directions)
    return "persistent recurrence (" + forward.describe() + ")";
  return "persistent recurrence, one direction after the other (" + forward.describe() + ")";
}

}  // namespace

CudaRnnLayer::CudaRnnLayer(CudaContext& ctx, DeviceParameters& params, const RnnLayer& cpu)
    : ctx_(ctx),
      params_(params),
      name_(cpu.name()),
      input_size_(cpu.input_size()),
      hidden_(cpu.hidden()),
      type_(cpu.type()),
      directions_(cpu.directions()),
      batch_norm_(cpu.batch_norm()),
      relu_clip_(cpu.relu_clip()),
      residual_(cpu.residual()) {
  for (int d = 0; d < directions_; ++d) {
    w_[d] = cpu.w(d);
    u_[d] = cpu.u(d);
    input_bias_[d] = cpu.input_bias(d);
    hidden_bias_[d] = cpu.hidden_bias(d);
  }
  // Both directions' W adjacent: the projection of both is one GEMM (as on the CPU).
  DS2_CHECK(directions_ == 1 || params_.value(w_[1]) ==
                                    params_.value(w_[0]) + int64_t{gates()} * hidden_ * input_size_,
            name_ << ": direction weights are not adjacent in the parameter store");
  if (batch_norm_) {
    DS2_CHECK(cpu.bn() != nullptr, name_ << ": batch norm enabled but the layer has none");
    bn_ = std::make_unique<CudaBatchNorm>(ctx, params, *cpu.bn());
  }
  if (directions_ == 2) {
    // The backward direction's recurrence runs on the side stream with its own handle. Layers
    // run one after another on the side stream, so they can share its workspace.
    side_blas_ = make_cublas_handle(ctx_.side_stream(), ctx_.side_cublas_workspace(),
                                    CudaContext::kCublasWorkspaceBytes);
  }
}

CudaRnnLayer::~CudaRnnLayer() {
  if (side_blas_) cublasDestroy(side_blas_);  // errors ignored: destructors must not throw
}

cudaStream_t CudaRnnLayer::stream(int d) const {
  return d == 0 ? ctx_.stream() : ctx_.side_stream();
}

cublasHandle_t CudaRnnLayer::blas(int d) const {
  return d == 0 ? ctx_.cublas() : side_blas_;
}

void CudaRnnLayer::forward(const DeviceSequences& in, DeviceSequences& out, bool training) {
  check_sequences(in, name_);
  const int T = static_cast<int>(in.time()), B = static_cast<int>(in.batch());
  DS2_CHECK(T * B == 0 || in.frame_size() == input_size_,
            name_ << ": input " << shape_str(in.data.shape()) << " is not " << input_size_
                  << " features per frame");
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  const int H16 = kernels::rnn_padded_ld(H);
  cudaStream_t main = ctx_.stream();

  // Input projection of every timestep and both directions: one {T*B, in} x {in, D*G*H} GEMM.
  projection_.data.resize({T, B, P});
  projection_.copy_lengths(in, main);
  if (ctx_.matmul_precision() == Precision::kBf16) {
    // Both copies zero-padded to ld_in columns: the GEMM sums over all of them (K a multiple of 8).
    const int ld_in = kernels::rnn_padded_ld(input_size_);
    const uint16_t* x16 =
        rounded_rows_to_bf16(in.data.data(), int64_t{T} * B, input_size_, input_bf16_, main);
    const uint16_t* w16 =
        rounded_rows_to_bf16(params_.value(w_[0]), P, input_size_, weight_bf16_, main);
    gemm_bf16(ctx_.cublas(), false, true, T * B, P, ld_in, 1.0f, x16, ld_in, w16, ld_in, 0.0f,
              projection_.data.data(), P);
  } else {
    gemm(ctx_, false, true, T * B, P, input_size_, 1.0f, in.data.data(), input_size_,
         params_.value(w_[0]), input_size_, 0.0f, projection_.data.data(), P);
  }
  if (batch_norm_) {
    bn_->forward(projection_, preactivation_, training);
  } else {
    kernels::rnn_add_input_bias(projection_.data.data(), int64_t{T} * B, GH,
                                params_.value(input_bias_[0]),
                                directions_ == 2 ? params_.value(input_bias_[1]) : nullptr, main);
  }

  active_rows_.assign(T, 0);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      if (t < in.lengths[b]) active_rows_[t] = b + 1;
  // The fp32 GEMM recurrence's padded steps read the states and the zero state in place, up to
  // gemm_recurrence_extra_rows past B; bf16 reads its copies. As there, direction 0's late states'
  // padding rows reach direction 1's first, which the side stream may be writing: their products
  // are discarded, like every padding row's.
  const bool bf16 = ctx_.matmul_precision() == Precision::kBf16;
  const int extra32 = bf16 ? 0 : gemm_recurrence_extra_rows(B, gates(), H, false);
  const int step_rows = gemm_recurrence_row_capacity(B, gates(), H, bf16);
  hidden_states_.resize({directions_, T, B, H}, int64_t{extra32} * H);
  zero_state_.resize({B + extra32, H});
  kernels::fill(zero_state_.data(), zero_state_.numel(), 0.0f, main);
  if (type_ == RnnType::kGru) {
    hidden_candidate_.resize({directions_, T, B, H});
    step_hidden_gates_.resize({directions_, step_rows, kernels::rnn_padded_ld(GH)});
  }
  ran_persistent_ = plan_persistent(B, /*backward=*/false);
  forward_ran_persistent_ = ran_persistent_;
  if (ran_persistent_) {
    run_persistent(/*backward=*/false, T, B, in.device_lengths.data(), nullptr);
  } else {
    if (bf16) {
      // The GEMM recurrence's bf16 operands (nn/cuda/gemm_recurrence.h): U rounded here, once a
      // pass (backward reuses it), the states by the step kernels into states_bf16_, which dU's
      // product reads as well.
      // Room for the rows past B that a padded step GEMM reads (gemm_recurrence_row_capacity).
      // Below 32 rows those of direction 0's late states reach direction 1's first, which the
      // side stream may be writing: their products are discarded, like every padding row's.
      round_recurrent_weights(main);
      states_bf16_.reserve(
          std::max<int64_t>(1, (int64_t{directions_} * T * B + step_rows - B) * H16));
      zero_state_bf16_.reserve(std::max<int64_t>(1, int64_t{step_rows} * H16));
      DS2_CUDA_CHECK(cudaMemsetAsync(zero_state_bf16_.data(), 0,
                                     sizeof(uint16_t) * zero_state_bf16_.capacity(), main));
    }
    step_products_.reserve(int64_t{directions_} * step_rows * H16);
    // Everything so far is on the main stream; the backward direction's recurrence waits for it
    // on the side stream and the main stream waits for that before summing.
    // The per-step launches of both directions replay as one CUDA graph when the same batch
    // shape and buffers come again.
    std::vector<int64_t> key = {
        T,
        B,
        reinterpret_cast<int64_t>(in.device_lengths.data()),
        reinterpret_cast<int64_t>((batch_norm_ ? preactivation_ : projection_).data.data()),
        reinterpret_cast<int64_t>(hidden_states_.data()),
        reinterpret_cast<int64_t>(hidden_candidate_.data()),
        reinterpret_cast<int64_t>(step_hidden_gates_.data()),
        reinterpret_cast<int64_t>(zero_state_.data()),
        reinterpret_cast<int64_t>(params_.values()),
        bf16,
        reinterpret_cast<int64_t>(recurrent_weight_bf16_.data()),
        reinterpret_cast<int64_t>(states_bf16_.data()),
        reinterpret_cast<int64_t>(zero_state_bf16_.data()),
        reinterpret_cast<int64_t>(step_products_.data())};
    key.insert(key.end(), active_rows_.begin(), active_rows_.end());
    forward_graph_.run(key, main, [&] {
      if (directions_ == 2) ctx_.fork_to_side();
      for (int d = 0; d < directions_; ++d) run_direction(d, T, B, in.device_lengths.data());
      if (directions_ == 2) ctx_.join_from_side();
    });
  }

  out.data.resize({T, B, H});
  out.copy_lengths(in, main);
  const int64_t n = int64_t{T} * B * H;
  const float* h0 = hidden_states_.data();
  kernels::rnn_sum_directions(h0, directions_ == 2 ? h0 + n : nullptr, out.data.data(), n, main);
  if (residual_) {
    // The input's padding may hold anything: add everywhere, then clear the padding again.
    kernels::axpy(out.data.data(), in.data.data(), n, 1.0f, main);
    kernels::zero_padding(out.data.data(), T, B, H, out.device_lengths.data(), main);
  }
}

void CudaRnnLayer::round_recurrent_weights(cudaStream_t stream) {
  const int64_t u_size = recurrent_weight_bf16_size(gates(), hidden_);
  recurrent_weight_bf16_.reserve(directions_ * u_size);
  for (int d = 0; d < directions_; ++d)
    round_recurrent_weight(params_.value(u_[d]), gates(), hidden_,
                           recurrent_weight_bf16_.data() + d * u_size, stream);
}

GemmRecurrence CudaRnnLayer::gemm_recurrence(int d, int B, const int* lengths) const {
  const bool bf16 = ctx_.matmul_precision() == Precision::kBf16;
  const int64_t u_size = recurrent_weight_bf16_size(gates(), hidden_);
  return GemmRecurrence{blas(d),
                        stream(d),
                        params_.value(u_[d]),
                        bf16 ? recurrent_weight_bf16_.data() + d * u_size : nullptr,
                        hidden_,
                        B,
                        lengths};
}

void CudaRnnLayer::run_direction(int d, int T, int B, const int* lengths) {
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  const int H16 = kernels::rnn_padded_ld(H);
  const bool reverse = d == 1;
  GemmRecurrence r = gemm_recurrence(d, B, lengths);
  const int step_rows = gemm_recurrence_row_capacity(B, gates(), H, r.bf16());
  r.product = step_products_.data() + int64_t{d} * step_rows * H16;
  float* pre = (batch_norm_ ? preactivation_ : projection_).data.data();
  float* hs = hidden_states_.data() + int64_t{d} * T * B * H;
  uint16_t* hs16 = r.bf16() ? states_bf16_.data() + int64_t{d} * T * B * H16 : nullptr;
  const bool gru = type_ == RnnType::kGru;
  const float* bias_h = gru ? params_.value(hidden_bias_[d]) : nullptr;
  float* g = gru ? step_hidden_gates_.data() + int64_t{d} * step_rows * kernels::rnn_padded_ld(GH)
                 : nullptr;
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? T - 1 - step : step;
    const int m = active_rows_[t];
    const int t_prev = reverse ? t + 1 : t - 1;
    // The backward direction's h_prev at an utterance's last frame is the zero padding row at
    // t + 1, so each utterance starts from zero at its own end.
    const bool first = t_prev < 0 || t_prev >= T;
    const float* h_prev = first ? zero_state_.data() : hs + int64_t{t_prev} * B * H;
    const uint16_t* h_prev16 = !hs16   ? nullptr
                               : first ? zero_state_bf16_.data()
                                       : hs16 + int64_t{t_prev} * B * H16;
    float* h = hs + int64_t{t} * B * H;
    uint16_t* h16 = hs16 ? hs16 + int64_t{t} * B * H16 : nullptr;
    float* p = pre + int64_t{t} * B * P + d * GH;  // row b at p + b * P
    // The next step's projection rows, which its GEMM (the clipped ReLU's) or step kernel reads.
    const int t_next = reverse ? t - 1 : t + 1;
    kernels::RnnStepPrefetch next;
    if (step + 1 < T) next.pre = pre + int64_t{t_next} * B * P + d * GH;
    if (!gru) {
      relu_gemm_step_forward(r, t, m, h_prev, h_prev16, p, P, h, h16, relu_clip_, next);
    } else {
      float* cand = hidden_candidate_.data() + (int64_t{d} * T + t) * B * H;
      gru_gemm_step_forward(r, t, m, h_prev, h_prev16, p, P, g, bias_h, h, h16, cand, next);
    }
  }
}

void CudaRnnLayer::backward(const DeviceSequences& in, const DeviceSequences& out,
                            const DeviceSequences& grad_out, DeviceSequences& grad_in) {
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  const int T = static_cast<int>(in.time()), B = static_cast<int>(in.batch());
  const int P = projection_size(), GH = gates() * hidden_;
  cudaStream_t main = ctx_.stream();
  const bool bf16 = ctx_.matmul_precision() == Precision::kBf16;
  // The fp32 GEMM recurrence's padded steps read dG in place past its last step's rows, as the
  // forward reads the states.
  const int extra32 = bf16 ? 0 : gemm_recurrence_extra_rows(B, gates(), hidden_, false);
  grad_preactivation_.data.resize({T, B, P}, int64_t{extra32} * P);
  grad_preactivation_.copy_lengths(in, main);
  if (type_ == RnnType::kGru)
    grad_hidden_gates_.resize({directions_, T, B, GH}, int64_t{extra32} * GH);
  carry_.resize({directions_, 2, gemm_recurrence_carry_size(B, gates(), hidden_, bf16)});

  const bool persistent = plan_persistent(B, /*backward=*/true);
  ran_persistent_ = persistent;
  if (persistent) {
    run_persistent(/*backward=*/true, T, B, in.device_lengths.data(), grad_out.data.data());
  } else {
    // bf16: each step's gradient rounded for its GEMM; U's copy is the forward's, unless the
    // forward ran persistent (a bf16 GRU forward on tensor cores, plan_persistent_gru).
    if (bf16) {
      step_grad_bf16_.reserve(std::max<int64_t>(
          1, int64_t{directions_} * gemm_recurrence_row_capacity(B, gates(), hidden_, true) *
                 kernels::rnn_padded_ld(GH)));
      if (forward_ran_persistent_) round_recurrent_weights(main);
    }
    auto backprop = [&] {
      if (directions_ == 2) ctx_.fork_to_side();
      for (int d = 0; d < directions_; ++d)
        backprop_direction(d, T, B, in.device_lengths.data(), grad_out.data.data());
      if (directions_ == 2) ctx_.join_from_side();
    };
    std::vector<int64_t> key = {
        T,
        B,
        reinterpret_cast<int64_t>(in.device_lengths.data()),
        reinterpret_cast<int64_t>(grad_out.data.data()),
        reinterpret_cast<int64_t>(grad_preactivation_.data.data()),
        reinterpret_cast<int64_t>(grad_hidden_gates_.data()),
        reinterpret_cast<int64_t>(carry_.data()),
        reinterpret_cast<int64_t>((batch_norm_ ? preactivation_ : projection_).data.data()),
        reinterpret_cast<int64_t>(projection_.data.data()),
        reinterpret_cast<int64_t>(hidden_states_.data()),
        reinterpret_cast<int64_t>(hidden_candidate_.data()),
        reinterpret_cast<int64_t>(zero_state_.data()),
        reinterpret_cast<int64_t>(params_.values()),
        bf16,
        reinterpret_cast<int64_t>(recurrent_weight_bf16_.data()),
        reinterpret_cast<int64_t>(step_grad_bf16_.data())};
    key.insert(key.end(), active_rows_.begin(), active_rows_.end());
    backward_graph_.run(key, main, backprop);
  }

  const DeviceSequences* grad_projection = &grad_preactivation_;
  if (batch_norm_) {
    // CudaBatchNorm::backward reads only its input and its own statistics, not the (since
    // overwritten) output in preactivation_.
    bn_->backward(projection_, preactivation_, grad_preactivation_, grad_projection_);
    grad_projection = &grad_projection_;
  }
  // Weight gradients: read by nothing later in backward, so they may overlap the layers below.
  const float* da = grad_projection->data.data();
  // bf16: dA rounded once for dW and dX (before the fork: the weight-gradient stream reads it);
  // X and W were rounded by the forward.
  const int ld_in = kernels::rnn_padded_ld(input_size_), ld_p = kernels::rnn_padded_ld(P);
  if (bf16) {
    rounded_rows_to_bf16(da, int64_t{T} * B, P, grad_bf16_, main);
    // dU's operands: the states, and the gradient it multiplies where that is not dA itself.
    // After a GEMM-recurrence forward its step kernels rounded the states into states_bf16_.
    if (forward_ran_persistent_)
      rounded_rows_to_bf16(hidden_states_.data(), int64_t{directions_} * T * B, hidden_,
                           states_bf16_, main);
    if (type_ == RnnType::kGru) {
      rounded_rows_to_bf16(grad_hidden_gates_.data(), int64_t{directions_} * T * B, GH,
                           grad_recurrent_bf16_, main);
    } else if (batch_norm_) {
      rounded_rows_to_bf16(grad_preactivation_.data.data(), int64_t{T} * B, P, grad_recurrent_bf16_,
                           main);
    }
  }
  const cudaStream_t ws = ctx_.fork_weight_gradients();
  const cublasHandle_t wh = ctx_.weight_gradient_cublas();
  for (int d = 0; d < directions_; ++d) accumulate_recurrent_gradients(d, T, B, bf16, ws, wh);
  // dW {D*G*H, in} += dA^T {D*G*H, T*B} X {T*B, in}; padding rows of dA are zero.
  if (bf16) {
    accumulate_weight_gradient_bf16(ctx_, wh, ws, P, input_size_, T * B, grad_bf16_.data(), ld_p,
                                    input_bf16_.data(), ld_in, params_.grad(w_[0]));
  } else {
    gemm(wh, ctx_.matmul_precision(), true, false, P, input_size_, T * B, 1.0f, da, P,
         in.data.data(), input_size_, 1.0f, params_.grad(w_[0]), input_size_);
  }
  if (!needs_input_grad_) return;
  grad_in.data.resize(in.data.shape());
  grad_in.copy_lengths(in, main);
  if (bf16) {
    gemm_bf16(ctx_.cublas(), false, false, T * B, input_size_, P, 1.0f, grad_bf16_.data(), ld_p,
              weight_bf16_.data(), ld_in, 0.0f, grad_in.data.data(), input_size_);
  } else {
    gemm(ctx_, false, false, T * B, input_size_, P, 1.0f, da, P, params_.value(w_[0]), input_size_,
         0.0f, grad_in.data.data(), input_size_);
  }
  if (residual_) {
    // The skip path passes dy straight through (its padding may hold anything).
    const int64_t n = int64_t{T} * B * hidden_;
    kernels::axpy(grad_in.data.data(), grad_out.data.data(), n, 1.0f, main);
    kernels::zero_padding(grad_in.data.data(), T, B, hidden_, grad_in.device_lengths.data(), main);
  }
}

void CudaRnnLayer::backprop_direction(int d, int T, int B, const int* lengths, const float* dy) {
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  const bool reverse = d == 1;
  const bool gru = type_ == RnnType::kGru;
  const GemmRecurrence r = gemm_recurrence(d, B, lengths);
  const float* pre = (batch_norm_ ? preactivation_ : projection_).data.data();
  const float* hs = hidden_states_.data() + int64_t{d} * T * B * H;
  float* dpre = grad_preactivation_.data.data();
  float* dgates = gru ? grad_hidden_gates_.data() + int64_t{d} * T * B * GH : nullptr;
  const int rows = gemm_recurrence_row_capacity(B, gates(), H, r.bf16());
  uint16_t* step16 =
      r.bf16() ? step_grad_bf16_.data() + int64_t{d} * rows * kernels::rnn_padded_ld(GH) : nullptr;
  const int64_t carry_size = gemm_recurrence_carry_size(B, gates(), H, r.bf16());
  float* carry = carry_.data() + d * 2 * carry_size;  // dL/dh_t from the step before
  float* next = carry + carry_size;                   // dL/dh_prev leaving this step
  kernels::fill(carry, carry_size, 0.0f, r.stream);

  // What step t reads that the forward wrote: its gates (the GRU's, in `pre`), the state its
  // step kernel reads (the clipped ReLU's h_t, the GRU's h_prev), dy and the GRU's candidate.
  const auto inputs = [&](int t) {
    kernels::RnnStepPrefetch in;
    in.pre = pre + int64_t{t} * B * P + d * GH;
    const int t_prev = reverse ? t + 1 : t - 1;
    if (!gru)
      in.state = hs + int64_t{t} * B * H;
    else
      in.state = (t_prev < 0 || t_prev >= T) ? zero_state_.data() : hs + int64_t{t_prev} * B * H;
    in.dy = dy + int64_t{t} * B * H;
    if (gru) in.candidate = hidden_candidate_.data() + (int64_t{d} * T + t) * B * H;
    return in;
  };
  // Backpropagation visits timesteps in the opposite order of the forward recurrence.
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? step : T - 1 - step;
    const int m = active_rows_[t];
    const kernels::RnnStepPrefetch in = inputs(t);
    kernels::RnnStepPrefetch next_step;
    if (step + 1 < T) next_step = inputs(reverse ? t + 1 : t - 1);
    float* dp = dpre + int64_t{t} * B * P + d * GH;
    if (!gru) {
      relu_gemm_step_backward(r, t, m, in.state, in.dy, carry, dp, P, step16, next, relu_clip_,
                              next_step);
    } else {
      float* dg = dgates + int64_t{t} * B * GH;
      gru_gemm_step_backward(r, t, m, in.pre, P, in.candidate, in.state, in.dy, carry, dp, dg,
                             step16, next, next_step);
    }
    std::swap(carry, next);
  }
}

void CudaRnnLayer::accumulate_recurrent_gradients(int d, int T, int B, bool bf16, cudaStream_t s,
                                                  cublasHandle_t handle) {
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  const bool reverse = d == 1;
  const bool gru = type_ == RnnType::kGru;
  const float* hs = hidden_states_.data() + int64_t{d} * T * B * H;
  const float* dpre = grad_preactivation_.data.data();
  // dU {G*H, H} += sum_t dG_t^T h_prev(t): one GEMM with the states shifted by one timestep (the
  // first step's h_prev is zero and contributes nothing). dG: the GRU's hidden gates {D, T, B, GH},
  // else this direction's columns of dpre {T, B, P}.
  const int64_t dg_offset = gru ? int64_t{d} * T * B * GH : int64_t{d} * GH;
  const float* dg_all = (gru ? grad_hidden_gates_.data() : dpre) + dg_offset;
  const int ldg = gru ? GH : P;
  if (T > 1) {
    const int rows = (T - 1) * B;
    // In bf16 the operands are the rounded copies, whose rows are kernels::rnn_padded_ld apart:
    // the states (the GEMM recurrence's layout) and dG, rounded by backward() (without BN or
    // gates, dG is dA and grad_bf16_ holds it).
    const int ldh = bf16 ? kernels::rnn_padded_ld(H) : H;
    const int ldg_op = bf16 ? kernels::rnn_padded_ld(ldg) : ldg;
    // The later factor starts one timestep after the earlier (in memory) one.
    const int64_t dg_shift = reverse ? 0 : int64_t{B} * ldg_op;
    const int64_t h_shift = reverse ? int64_t{B} * ldh : 0;
    if (bf16) {
      const int64_t dg16_offset = gru ? int64_t{d} * T * B * ldg_op : int64_t{d} * GH;
      const uint16_t* dg16 =
          (gru || batch_norm_ ? grad_recurrent_bf16_.data() : grad_bf16_.data()) + dg16_offset;
      accumulate_weight_gradient_bf16(ctx_, handle, s, GH, H, rows, dg16 + dg_shift, ldg_op,
                                      states_bf16_.data() + int64_t{d} * T * B * ldh + h_shift, ldh,
                                      params_.grad(u_[d]));
    } else {
      gemm(handle, ctx_.matmul_precision(), true, false, GH, H, rows, 1.0f, dg_all + dg_shift, ldg,
           hs + h_shift, H, 1.0f, params_.grad(u_[d]), H);
    }
  }
  if (gru)
    kernels::rnn_column_sum(dg_all, int64_t{T} * B, GH, GH, params_.grad(hidden_bias_[d]), true, s);
  if (!batch_norm_)
    kernels::rnn_column_sum(dpre + d * GH, int64_t{T} * B, GH, P, params_.grad(input_bias_[d]),
                            true, s);
}

bool CudaRnnLayer::plan_persistent(int B, bool backward) {
  if (!use_persistent_) return false;
  const int batch = std::max(B, 1);
  if (type_ == RnnType::kGru) return plan_persistent_gru(batch, backward);
  // A plan covers batches up to its maximum.
  const Precision precision = ctx_.matmul_precision();
  bool replanned = false;
  if (needs_replan(prnn_plan_.get(), batch, precision)) {
    prnn_plan_ = plans_for_directions<PersistentRnnPlan>(hidden_, batch, directions_, ctx_.device(),
                                                         precision)
                     .forward;
    masks_changed_ = masks_changed_ || !masks_[0].empty();  // replan the sparse side as well
    replanned = true;
  }
  if (masks_changed_ || (sprnn_plan_ && (batch > sprnn_plan_->max_batch() ||
                                         sprnn_plan_->precision() != precision))) {
    plan_sparse(batch);
    replanned = true;
  }
  // Judged per call: a plan serves every batch up to its own.
  const bool tensor_cores = prnn_plan_->tiling().tensor_cores;
  const bool gemm = !sparse_chosen_ && prnn_plan_->fits() &&
                    (precision == Precision::kFp32
                         ? !tensor_cores && relu_fp32_math_on_gemm(hidden_, directions_, batch)
                         : tensor_cores && relu_bf16_tensor_on_gemm(hidden_, batch));
  const int gemm_batch = gemm ? batch : 0;
  if (gemm_batch != relu_gemm_batch_) replanned = true;
  relu_gemm_batch_ = gemm_batch;
  if (replanned) describe_choice();  // not per call: this runs in every forward and backward
  if (!sparse_chosen_ && (!prnn_plan_->fits() || gemm)) return false;
  // The cluster kernel needs no workspace (its exchange lives in shared memory): 0 bytes is a
  // plan that runs, not one that does not.
  const size_t bytes =
      sparse_chosen_ ? sprnn_plan_->workspace_bytes() : prnn_plan_->workspace_bytes();
  if (bytes > 0) reserve_workspace(bytes);
  return true;
}

void CudaRnnLayer::reserve_workspace(size_t bytes) {
  prnn_workspace_.reserve(static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float)));
}

bool CudaRnnLayer::plan_persistent_gru(int batch, bool backward) {
  // The GRU's persistent kernels hold fp32 weights, and a bf16 plan adds passes on tensor cores
  // with U rounded to bf16: the forward wherever one fits, backward-data where the fp32 split's is
  // off them (PersistentGruPlan says why; sets of 8, 16 or 32 batch rows; the forward to H 2048,
  // backward-data to H 1365, to H 1536 in sets of 16, to H 1877 in sets of 8). In bf16 training the
  // recurrence runs on them (the projections and weight gradients stay bf16): more exact than the
  // bf16 GEMM recurrence, and without its per-step launches (kernels/NOTES.md, session 56) --
  // except where a pass is on the fp32-math kernel, which redoes its products every pass of 4 rows:
  // past gru_fma_max_batch the GEMM recurrence is faster, in bf16 and in fp32. So does a
  // bidirectional layer's bf16 pass that runs its directions one after the other in sets too wide
  // (gru_in_turn_on_gemm). Both rules, with their measurements: nn/cuda/recurrence_choice.h. The
  // two passes decide apart: they read and write the same arrays either way.
  const bool bf16 = ctx_.matmul_precision() == Precision::kBf16;
  const Precision precision = bf16 ? Precision::kBf16 : Precision::kFp32;
  const bool replan = needs_replan(gru_plan_.get(), batch, precision);
  if (replan) {
    PassPlans<PersistentGruPlan> plans = plans_for_directions<PersistentGruPlan>(
        hidden_, batch, directions_, ctx_.device(), precision);
    gru_plan_ = std::move(plans.forward);
    gru_backward_plan_ = std::move(plans.backward);
  }
  // Judged per call: a plan serves every batch up to its own.
  const PersistentGruPlan& backward_plan = gru_backward_plan_ ? *gru_backward_plan_ : *gru_plan_;
  const bool fma_forward = gru_plan_->fits() &&
                           batch > gru_fma_max_batch(precision, hidden_, directions_, false) &&
                           !gru_plan_->forward_on_tensor_cores();
  const bool fma_backward = gru_plan_->fits() &&
                            batch > gru_fma_max_batch(precision, hidden_, directions_, true) &&
                            !backward_plan.backward_on_tensor_cores();
  const bool gemm_forward =
      fma_forward || gru_in_turn_on_gemm(*gru_plan_, directions_, false, batch);
  const bool gemm_backward =
      fma_backward || gru_in_turn_on_gemm(backward_plan, directions_, true, batch);
  if (replan || gemm_forward != gru_gemm_forward_ || gemm_backward != gru_gemm_backward_) {
    gru_gemm_forward_ = gemm_forward;
    gru_gemm_backward_ = gemm_backward;
    // Each pass's reason: off the tensor cores, or its directions in turn in sets too wide.
    const auto reason = [&](bool fma, const kernels::PrnnTiling& m) {
      return fma ? std::string(" off the tensor cores")
                 : " one direction after the other in sets of " +
                       std::to_string(m.group_rows(batch)) + " batch rows";
    };
    const std::string forward_reason = reason(fma_forward, gru_plan_->mma_forward_tiling());
    const std::string backward_reason = reason(fma_backward, backward_plan.mma_backward_tiling());
    const std::string passes =
        gemm_forward && gemm_backward
            ? (forward_reason == backward_reason
                   ? "forward and backward-data" + forward_reason
                   : "forward" + forward_reason + " and backward-data" + backward_reason)
        : gemm_forward ? "forward" + forward_reason
                       : "backward-data" + backward_reason;
    const std::string why = std::string(precision_name(precision)) + " at batch " +
                            std::to_string(batch) + " with the persistent GRU's " + passes +
                            (bf16 ? ": the GEMM recurrence on bf16 operands is faster"
                                  : ": the GEMM recurrence is faster");
    recurrence_path_ = recurrence_of(*gru_plan_, directions_, gru_backward_plan_.get());
    if (gemm_forward && gemm_backward) {
      recurrence_path_ = "GEMM recurrence (" + why + ")";
    } else if (gemm_forward || gemm_backward) {
      recurrence_path_ += std::string("; ") + (gemm_forward ? "forward" : "backward-data") +
                          " on the GEMM recurrence (" + why + ")";
    } else if (gru_plan_->fits() && bf16) {
      recurrence_path_ += gru_plan_->pass_in_bf16(false) || backward_plan.pass_in_bf16(true)
                              ? " (bf16 training: U rounded to bf16 in the passes on bf16 tensor "
                                "cores, fp32 weights in the others)"
                              : " (bf16 training: the GRU recurrence keeps fp32 weights)";
    }
  }
  if (!gru_plan_->fits() || (backward ? gemm_backward : gemm_forward)) return false;
  reserve_workspace(std::max(gru_plan_->workspace_bytes(),
                             gru_backward_plan_ ? gru_backward_plan_->workspace_bytes() : 0));
  return true;
}

void CudaRnnLayer::run_persistent_gru(bool backward, int T, int B, const int* lengths,
                                      const float* dy) {
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  float* pre = (batch_norm_ ? preactivation_ : projection_).data.data();
  kernels::PgruDirection dirs[2];
  for (int d = 0; d < directions_; ++d) {
    kernels::PgruDirection& p = dirs[d];
    p.u = params_.value(u_[d]);
    p.bias_h = params_.value(hidden_bias_[d]);
    p.gates = pre + int64_t{d} * GH;  // input side in; r, z, n out (what backward reads)
    p.ld_gates = P;
    p.candidate = hidden_candidate_.data() + int64_t{d} * T * B * H;
    p.h = hidden_states_.data() + int64_t{d} * T * B * H;
    p.reverse = d == 1;
    if (backward) {
      p.dy = dy;
      p.ld_dy = H;
      p.dpre = grad_preactivation_.data.data() + int64_t{d} * GH;
      p.ld_dpre = P;
      p.dgates = grad_hidden_gates_.data() + int64_t{d} * T * B * GH;
    }
  }
  const size_t bytes = static_cast<size_t>(prnn_workspace_.capacity()) * sizeof(float);
  const PersistentGruPlan& plan = backward && gru_backward_plan_ ? *gru_backward_plan_ : *gru_plan_;
  // Two cooperative kernels on two streams are not guaranteed co-resident: without a
  // two-direction plan the directions run one after the other on the main stream.
  const int launches = plan.directions() == directions_ ? 1 : directions_;
  for (int i = 0; i < launches; ++i) {
    if (backward)
      persistent_gru_backward_data(plan, dirs + i, lengths, T, B, prnn_workspace_.data(), bytes,
                                   ctx_.stream());
    else
      persistent_gru_forward(plan, dirs + i, lengths, T, B, prnn_workspace_.data(), bytes,
                             ctx_.stream());
  }
}

void CudaRnnLayer::describe_choice() {
  if (!prnn_plan_) return;
  std::string choice;
  if (sparse_chosen_)
    choice = sparse_path_;
  else if (relu_gemm_batch_ > 0)
    choice = ctx_.matmul_precision() == Precision::kFp32
                 ? "GEMM recurrence (fp32 at batch " + std::to_string(relu_gemm_batch_) +
                       " with the persistent RNN off the tensor cores: the GEMM recurrence is "
                       "faster)"
                 : "GEMM recurrence (bf16 at batch " + std::to_string(relu_gemm_batch_) +
                       " and hidden " + std::to_string(hidden_) +
                       " on tensor cores: the GEMM recurrence on bf16 operands is faster)";
  else
    choice = recurrence_of(*prnn_plan_, directions_);
  if (!sparse_chosen_ && !sparse_path_.empty()) choice += "; " + sparse_path_;
  // The trainer logs it (recurrence_path()); library code prints nothing.
  recurrence_path_ = choice;
}

void CudaRnnLayer::set_recurrent_masks(const uint8_t* fwd, const uint8_t* bwd) {
  const uint8_t* masks[2] = {fwd, bwd};
  const size_t n = size_t(hidden_) * hidden_;
  for (int d = 0; d < 2; ++d) {
    if (d < directions_ && masks[d])
      masks_[d].assign(masks[d], masks[d] + n);
    else
      masks_[d].clear();
  }
  DS2_CHECK(masks_[0].empty() == (directions_ == 1 || masks_[1].empty()),
            name_ << ": set_recurrent_masks needs a mask for every direction or for none");
  masks_changed_ = true;
  // With a batch already planned (after the engine's reserve), plan now: between steps.
  if (prnn_plan_ && type_ == RnnType::kRelu && use_persistent_) {
    plan_sparse(prnn_plan_->max_batch());
    describe_choice();
  }
}

void CudaRnnLayer::plan_sparse(int batch) {
  masks_changed_ = false;
  sparse_chosen_ = false;
  sparse_path_.clear();
  if (masks_[0].empty()) {
    sprnn_plan_.reset();
    return;
  }
  int fullest = 0;
  for (int d = 0; d < directions_; ++d)
    fullest = std::max(fullest, max_row_nonzeros(masks_[d].data(), hidden_));
  const Precision precision = ctx_.matmul_precision();
  auto plan = std::make_unique<SparsePersistentRnnPlan>(hidden_, batch, fullest, directions_,
                                                        ctx_.device(), precision);
  if (!plan->fits() && directions_ == 2)
    plan = std::make_unique<SparsePersistentRnnPlan>(hidden_, batch, fullest, 1, ctx_.device(),
                                                     precision);
  sprnn_plan_ = std::move(plan);
  const PersistentRnnPlan* dense = prnn_plan_ && prnn_plan_->fits() ? prnn_plan_.get() : nullptr;
  if (!sprnn_plan_->fits()) {
    sparse_path_ = "not sparse: " + sprnn_plan_->why_not();
    return;
  }
  if (!prefer_sparse(*sprnn_plan_, dense)) {
    sparse_path_ = "not sparse: the dense kernel is expected faster at a fullest row of " +
                   std::to_string(fullest) + " of " + std::to_string(hidden_) + " weights";
    return;
  }
  const int64_t words = kernels::sprnn_layout_words(sprnn_plan_->tiling());
  sprnn_layouts_.reserve(2 * directions_ * words);  // grows only; a smaller mask reuses it
  for (int d = 0; d < directions_; ++d)
    for (int pass = 0; pass < 2; ++pass) {
      const std::vector<uint32_t> layout = sprnn_plan_->layout(masks_[d].data(), pass == 1);
      // Synchronous: the host vector is freed right after.
      DS2_CUDA_CHECK(cudaMemcpy(sprnn_layouts_.data() + (2 * d + pass) * words, layout.data(),
                                layout.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
    }
  sparse_chosen_ = true;
  reserve_workspace(sprnn_plan_->workspace_bytes());
  sparse_path_ =
      std::string("sparse persistent recurrence") +
      (sprnn_plan_->directions() == directions_ ? "" : ", one direction after the other") + " (" +
      sprnn_plan_->describe() + ")";
}

void CudaRnnLayer::run_persistent(bool backward, int T, int B, const int* lengths,
                                  const float* dy) {
  if (type_ == RnnType::kGru) {
    run_persistent_gru(backward, T, B, lengths, dy);
    return;
  }
  const int H = hidden_, P = projection_size();
  const float* pre = (batch_norm_ ? preactivation_ : projection_).data.data();
  const int64_t words = sparse_chosen_ ? kernels::sprnn_layout_words(sprnn_plan_->tiling()) : 0;
  PersistentRnnDirection dirs[2];
  for (int d = 0; d < directions_; ++d) {
    PersistentRnnDirection& p = dirs[d];
    float* hs = hidden_states_.data() + int64_t{d} * T * B * H;
    p.u = params_.value(u_[d]);
    p.reverse = d == 1;
    if (sparse_chosen_)
      p.layout = reinterpret_cast<const uint32_t*>(sprnn_layouts_.data()) +
                 (2 * d + (backward ? 1 : 0)) * words;
    if (!backward) {
      p.x = pre + int64_t{d} * H;  // read only: backward needs h, not U h (BN reads its input)
      p.ld_x = P;
      p.y = hs;
      p.ld_y = H;
    } else {
      p.x = dy;
      p.ld_x = H;
      p.h = hs;
      p.y = grad_preactivation_.data.data() + int64_t{d} * H;
      p.ld_y = P;
    }
  }
  const size_t bytes = static_cast<size_t>(prnn_workspace_.capacity()) * sizeof(float);
  // Two cooperative kernels on two streams are not guaranteed co-resident, so without a
  // two-direction plan the directions run one after the other on the main stream.
  const int planned = sparse_chosen_ ? sprnn_plan_->directions() : prnn_plan_->directions();
  const int launches = planned == directions_ ? 1 : directions_;
  for (int i = 0; i < launches; ++i) {
    if (sparse_chosen_ && backward)
      sparse_persistent_rnn_backward_data(*sprnn_plan_, dirs + i, lengths, T, B, relu_clip_,
                                          prnn_workspace_.data(), bytes, ctx_.stream());
    else if (sparse_chosen_)
      sparse_persistent_rnn_forward(*sprnn_plan_, dirs + i, lengths, T, B, relu_clip_,
                                    prnn_workspace_.data(), bytes, ctx_.stream());
    else if (backward)
      persistent_rnn_backward_data(*prnn_plan_, dirs + i, lengths, T, B, relu_clip_,
                                   prnn_workspace_.data(), bytes, ctx_.stream());
    else
      persistent_rnn_forward(*prnn_plan_, dirs + i, lengths, T, B, relu_clip_,
                             prnn_workspace_.data(), bytes, ctx_.stream());
  }
}

}  // namespace ds2
