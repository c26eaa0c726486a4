#include "nn/rnn_layer.h"

#include <algorithm>
#include <sstream>

#include "core/blas.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/gru_cell_backward.h"
#include "core/vector_math.h"
#include "nn/activations.h"

namespace ds2 {

namespace {

const char* const kDirectionNames[2] = {"fwd", "bwd"};

// One frame's GRU backward for H neurons (core/gru_cell_backward.h, as the GPU kernels): from dh =
// dy + carry and the forward's gates r, z, n (pre, rows of 3H), hn and h_prev, the gate
// gradients (into dpre and dgates, whose n gradient is dn r) and the direct path into h_prev.
// The buffers are distinct; __restrict says so, without which GCC's alias checks for these 8
// arrays exceed its limit and the loop stays scalar.
void gru_backward_frame(const float* __restrict pre, const float* __restrict dy,
                        const float* __restrict carry, const float* __restrict h_prev,
                        const float* __restrict hn, float* __restrict dpre,
                        float* __restrict dgates, float* __restrict dh_prev, int H) {
  for (int k = 0; k < H; ++k) {
    const GruGrads g =
        gru_cell_backward(dy[k] + carry[k], pre[k], pre[H + k], pre[2 * H + k], hn[k], h_prev[k]);
    store_gate_grads(g, dpre + k, dgates + k, H);
    dh_prev[k] = g.dh_prev;
  }
}

// sums[c] += sum over rows of a[r * lda + c].
void add_column_sums(const float* a, int64_t rows, int cols, int64_t lda, float* sums) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a + r * lda;
    for (int c = 0; c < cols; ++c) sums[c] += row[c];
  }
}

}  // namespace

RnnType parse_rnn_type(const std::string& name) {
  if (name == "rnn") return RnnType::kRelu;
  if (name == "gru") return RnnType::kGru;
  DS2_FAIL("unknown rnn type '" << name << "' (valid: rnn, gru)");
}

std::string rnn_type_name(RnnType type) {
  return type == RnnType::kGru ? "gru" : "rnn";
}

namespace {
// y += x over the rows t < lengths[b]; padding rows of y stay as they are (zero).
void add_valid_rows(const Sequences& x, Sequences& y) {
  const int64_t T = x.data.dim(0), B = x.data.dim(1), F = x.frame_size();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) {
      if (t >= x.lengths[b]) continue;
      const float* xs = x.data.data() + (t * B + b) * F;
      float* ys = y.data.data() + (t * B + b) * F;
      for (int64_t k = 0; k < F; ++k) ys[k] += xs[k];
    }
}
}  // namespace

RnnLayer::RnnLayer(const std::string& name, ParameterStore& store, int input_size, int hidden,
                   RnnType type, bool bidirectional, bool batch_norm, float relu_clip,
                   float bn_momentum, bool residual, NormStatistics bn_statistics)
    : name_(name),
      store_(store),
      input_size_(input_size),
      hidden_(hidden),
      type_(type),
      directions_(bidirectional ? 2 : 1),
      batch_norm_(batch_norm),
      relu_clip_(relu_clip),
      residual_(residual) {
  DS2_CHECK(input_size > 0 && hidden > 0,
            name << ": sizes must be positive, got input " << input_size << " hidden " << hidden);
  DS2_CHECK(!residual || input_size == hidden, name << ": a residual connection needs input size "
                                                    << input_size << " to equal hidden size "
                                                    << hidden);
  DS2_CHECK(type == RnnType::kGru || relu_clip > 0.0f,
            name << ": relu clip must be positive, got " << relu_clip);
  const int gh = gates() * hidden;
  const Init init = Init::uniform_fan_in(hidden);
  for (int d = 0; d < directions_; ++d)
    w_[d] = store.add(name + "." + kDirectionNames[d] + ".W", {gh, input_size}, init);
  for (int d = 0; d < directions_; ++d) {
    const std::string prefix = name + "." + kDirectionNames[d];
    u_[d] = store.add(prefix + ".U", {gh, hidden}, init);
    if (!batch_norm)
      input_bias_[d] = store.add(prefix + (type == RnnType::kGru ? ".b_x" : ".b"), {gh}, init);
    if (type == RnnType::kGru) hidden_bias_[d] = store.add(prefix + ".b_h", {gh}, init);
  }
  if (batch_norm)
    bn_ = std::make_unique<BatchNorm>(name + ".bn", store, projection_size(), bn_momentum,
                                      bn_statistics);
}

std::string RnnLayer::describe() const {
  std::ostringstream out;
  out << (type_ == RnnType::kGru ? "GRU " : "RNN(clipped relu) ") << input_size_ << "->" << hidden_
      << (directions_ == 2 ? " bidirectional(sum)" : " unidirectional")
      << (batch_norm_ ? (bn_->per_utterance() ? " +BN(per utterance)" : " +BN") : "");
  if (type_ == RnnType::kRelu) out << " clip " << relu_clip_;
  if (residual_) out << " +residual";
  return out.str();
}

Shape RnnLayer::output_frame_shape(const Shape& input_frame_shape) const {
  DS2_CHECK(shape_numel(input_frame_shape) == input_size_,
            name_ << ": frame shape " << shape_str(input_frame_shape) << " is not " << input_size_
                  << " features");
  return {hidden_};
}

void RnnLayer::forward(const Sequences& in, Sequences& out, bool training) {
  check_sequences(in, name_);
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  DS2_CHECK(T * B == 0 || in.frame_size() == input_size_,
            name_ << ": input " << shape_str(in.data.shape()) << " is not " << input_size_
                  << " features per frame");
  const int H = hidden_, P = projection_size(), GH = gates() * H;

  // Both directions' W are adjacent in the store: one {T*B, in} x {in, D*G*H} GEMM.
  DS2_CHECK(
      directions_ == 1 || store_.value(w_[1]) == store_.value(w_[0]) + int64_t{GH} * input_size_,
      name_ << ": direction weights are not adjacent in the parameter store");
  projection_.data.resize({T, B, P});
  projection_.lengths = in.lengths;
  gemm(false, true, T * B, P, input_size_, 1.0f, in.data.data(), input_size_, store_.value(w_[0]),
       input_size_, 0.0f, projection_.data.data(), P);
  Sequences& pre = batch_norm_ ? preactivation_ : projection_;
  if (batch_norm_) {
    bn_->forward(projection_, preactivation_, training);
  } else {
    for (int d = 0; d < directions_; ++d) {
      const float* bias = store_.value(input_bias_[d]);
      for (int64_t row = 0; row < int64_t{T} * B; ++row) {
        float* p = pre.data.data() + row * P + d * GH;
        for (int k = 0; k < GH; ++k) p[k] += bias[k];
      }
    }
  }

  active_rows_.assign(T, 0);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      if (t < in.lengths[b]) active_rows_[t] = b + 1;
  hidden_states_.resize({directions_, T, B, H});
  zero_state_.resize({B, H});
  zero_state_.fill(0.0f);
  if (type_ == RnnType::kGru) {
    hidden_candidate_.resize({directions_, T, B, H});
    step_hidden_gates_.resize({directions_, B, GH});
  }
  // U^T once a forward: OpenBLAS packs the B operand of an NT product anew on every call, and the
  // recurrence calls it every timestep with a small M. scripts/dev/sgemm-forms.sh (single-threaded
  // sgemm, C += A B), two runs: M 16, K = N = 192 (the digits model) NT 17.8-20.1 us, NN 10.3-10.9
  // (M 8: 13.5-15.1 against 5.2-5.8; H 320 50-52 against 43-44; H 768 ~285-292 against ~256-259).
  u_transposed_.resize({directions_, H, GH});
  for (int d = 0; d < directions_; ++d) {
    const float* u = store_.value(u_[d]);
    float* ut = u_transposed_.data() + int64_t{d} * H * GH;
    for (int r = 0; r < GH; ++r)
      for (int c = 0; c < H; ++c) ut[int64_t{c} * GH + r] = u[int64_t{r} * H + c];
  }
  const int slices = recurrence_slices(B);
  run_parts(directions_ * slices, [&](int part) {
    const int slice = part % slices;
    run_direction(part / slices, in, B * slice / slices, B * (slice + 1) / slices);
  });

  out.data.resize({T, B, H});
  out.lengths = in.lengths;
  const int64_t n = int64_t{T} * B * H;
  const float* h0 = hidden_states_.data();
  float* y = out.data.data();
  if (directions_ == 1) {
    std::copy(h0, h0 + n, y);
  } else {
    const float* h1 = h0 + n;
    for (int64_t i = 0; i < n; ++i) y[i] = h0[i] + h1[i];
  }
  if (residual_) add_valid_rows(in, out);
}

int RnnLayer::recurrence_slices(int batch) const {
  return std::max(1, std::min(batch, cpu_threads() / directions_));
}

void RnnLayer::run_direction(int d, const Sequences& in, int b0, int b1) {
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  const bool reverse = d == 1;
  const float* ut = u_transposed_.data() + int64_t{d} * H * GH;
  float* pre = (batch_norm_ ? preactivation_ : projection_).data.data();
  float* hs = hidden_states_.data() + int64_t{d} * T * B * H;
  const float* bias_h = type_ == RnnType::kGru ? store_.value(hidden_bias_[d]) : nullptr;
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? T - 1 - step : step;
    const int m = std::clamp(active_rows_[t] - b0, 0, b1 - b0);  // of this slice's rows
    const int t_prev = reverse ? t + 1 : t - 1;
    const float* h_prev =
        (t_prev < 0 || t_prev >= T) ? zero_state_.data() : hs + int64_t{t_prev} * B * H;
    float* h = hs + int64_t{t} * B * H;
    float* p = pre + int64_t{t} * B * P + d * GH;  // row b at p + b * P
    if (type_ == RnnType::kRelu) {
      // pre += h_prev U^T, then the clipped ReLU.
      gemm(false, false, m, H, H, 1.0f, h_prev + int64_t{b0} * H, H, ut, H, 1.0f,
           p + int64_t{b0} * P, P);
      for (int b = b0; b < b1; ++b) {
        if (t < in.lengths[b]) {
          clipped_relu(p + int64_t{b} * P, h + int64_t{b} * H, H, relu_clip_);
        } else {
          std::fill(h + int64_t{b} * H, h + int64_t{b + 1} * H, 0.0f);
        }
      }
      continue;
    }
    float* g = step_hidden_gates_.data() + int64_t{d} * B * GH;  // row b at g + b * GH
    gemm(false, false, m, GH, H, 1.0f, h_prev + int64_t{b0} * H, H, ut, GH, 0.0f,
         g + int64_t{b0} * GH, GH);
    float* cand = hidden_candidate_.data() + (int64_t{d} * T + t) * B * H;
    for (int b = b0; b < b1; ++b) {
      float* hb = h + int64_t{b} * H;
      if (t >= in.lengths[b]) {
        std::fill(hb, hb + H, 0.0f);
        continue;
      }
      // r, z, n stored in place of their preactivations. Whole-array passes, so the
      // sigmoids and tanh vectorize.
      float* r = p + int64_t{b} * P;
      float* z = r + H;
      float* n = z + H;
      const float* gb = g + int64_t{b} * GH;
      const float* hp = h_prev + int64_t{b} * H;
      float* hn = cand + int64_t{b} * H;
      for (int k = 0; k < 2 * H; ++k) r[k] += gb[k] + bias_h[k];
      vector_sigmoid(r, r, 2 * H);
      for (int k = 0; k < H; ++k) {
        hn[k] = gb[2 * H + k] + bias_h[2 * H + k];
        n[k] += r[k] * hn[k];
      }
      vector_tanh(n, n, H);
      for (int k = 0; k < H; ++k) hb[k] = (1.0f - z[k]) * n[k] + z[k] * hp[k];
    }
  }
}

void RnnLayer::backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                        Sequences& grad_in) {
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  grad_preactivation_.data.resize({T, B, P});
  grad_preactivation_.lengths = in.lengths;
  if (type_ == RnnType::kGru) grad_hidden_gates_.resize({directions_, T, B, GH});
  carry_a_.resize({directions_, B, H});
  carry_b_.resize({directions_, B, H});
  const int slices = recurrence_slices(B);
  run_parts(directions_ * slices, [&](int part) {
    const int slice = part % slices;
    backprop_direction(part / slices, in, grad_out, B * slice / slices, B * (slice + 1) / slices);
  });
  for (int d = 0; d < directions_; ++d) accumulate_weight_grads(d, T, B);

  const Sequences* grad_projection = &grad_preactivation_;
  if (batch_norm_) {
    // BatchNorm::backward reads only its input and its own statistics, not the (since
    // overwritten) output in preactivation_.
    bn_->backward(projection_, preactivation_, grad_preactivation_, grad_projection_);
    grad_projection = &grad_projection_;
  }
  // dW {D*G*H, in} += dA^T {D*G*H, T*B} X {T*B, in}; padding rows of dA are zero.
  const float* da = grad_projection->data.data();
  gemm(true, false, P, input_size_, T * B, 1.0f, da, P, in.data.data(), input_size_, 1.0f,
       store_.grad(w_[0]), input_size_);
  if (!needs_input_grad_) return;
  grad_in.data.resize(in.data.shape());
  grad_in.lengths = in.lengths;
  gemm(false, false, T * B, input_size_, P, 1.0f, da, P, store_.value(w_[0]), input_size_, 0.0f,
       grad_in.data.data(), input_size_);
  if (residual_) add_valid_rows(grad_out, grad_in);  // the skip path passes dy straight through
}

void RnnLayer::backprop_direction(int d, const Sequences& in, const Sequences& grad_out, int b0,
                                  int b1) {
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  const bool reverse = d == 1;
  const bool gru = type_ == RnnType::kGru;
  const float* u = store_.value(u_[d]);
  const float* pre = (batch_norm_ ? preactivation_ : projection_).data.data();
  const float* hs = hidden_states_.data() + int64_t{d} * T * B * H;
  const float* dy = grad_out.data.data();
  float* dpre = grad_preactivation_.data.data();
  float* dgates = gru ? grad_hidden_gates_.data() + int64_t{d} * T * B * GH : nullptr;
  float* carry = carry_a_.data() + int64_t{d} * B * H;  // dL/dh_t from the step processed before
  float* next = carry_b_.data() + int64_t{d} * B * H;   // dL/dh_prev leaving this step
  std::fill(carry + int64_t{b0} * H, carry + int64_t{b1} * H, 0.0f);

  // Backpropagation visits timesteps in the opposite order of the forward recurrence.
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? step : T - 1 - step;
    const int m = std::clamp(active_rows_[t] - b0, 0, b1 - b0);  // of this slice's rows
    const int t_prev = reverse ? t + 1 : t - 1;
    const float* h_prev =
        (t_prev < 0 || t_prev >= T) ? zero_state_.data() : hs + int64_t{t_prev} * B * H;
    const float* h = hs + int64_t{t} * B * H;
    const float* p = pre + int64_t{t} * B * P + d * GH;
    float* dp = dpre + int64_t{t} * B * P + d * GH;
    float* dg = gru ? dgates + int64_t{t} * B * GH : dp;
    const int ldg = gru ? GH : P;
    for (int b = b0; b < b1; ++b) {
      float* dpb = dp + int64_t{b} * P;
      float* nb = next + int64_t{b} * H;
      if (t >= in.lengths[b]) {
        std::fill(dpb, dpb + GH, 0.0f);
        if (gru) std::fill(dg + int64_t{b} * GH, dg + int64_t{b + 1} * GH, 0.0f);
        std::fill(nb, nb + H, 0.0f);
        continue;
      }
      const float* dyb = dy + (int64_t{t} * B + b) * H;
      const float* cb = carry + int64_t{b} * H;
      if (!gru) {
        clipped_relu_backward(h + int64_t{b} * H, dyb, cb, dpb, H, relu_clip_);
        continue;
      }
      gru_backward_frame(p + int64_t{b} * P, dyb, cb, h_prev + int64_t{b} * H,
                         hidden_candidate_.data() + ((int64_t{d} * T + t) * B + b) * H, dpb,
                         dg + int64_t{b} * GH, nb, H);
    }
    // dL/dh_prev (+)= dG U: the relu path has no direct term, so it overwrites.
    gemm(false, false, m, H, GH, 1.0f, dg + int64_t{b0} * ldg, ldg, u, H, gru ? 1.0f : 0.0f,
         next + int64_t{b0} * H, H);
    std::swap(carry, next);
  }
}

void RnnLayer::accumulate_weight_grads(int d, int T, int B) {
  const int H = hidden_, P = projection_size(), GH = gates() * H;
  const bool reverse = d == 1;
  const bool gru = type_ == RnnType::kGru;
  const float* hs = hidden_states_.data() + int64_t{d} * T * B * H;
  float* dpre = grad_preactivation_.data.data();
  float* dgates = gru ? grad_hidden_gates_.data() + int64_t{d} * T * B * GH : nullptr;

  // dU {G*H, H} += sum_t dG_t^T h_prev(t): one GEMM with h_prev as the state matrix shifted by
  // one timestep (t = first step's h_prev is zero and contributes nothing).
  const float* dg_all = gru ? dgates : dpre + d * GH;
  const int64_t ldg = gru ? GH : P;
  if (T > 1) {
    const int rows = (T - 1) * B;
    if (reverse) {
      gemm(true, false, GH, H, rows, 1.0f, dg_all, static_cast<int>(ldg), hs + int64_t{B} * H, H,
           1.0f, store_.grad(u_[d]), H);
    } else {
      gemm(true, false, GH, H, rows, 1.0f, dg_all + B * ldg, static_cast<int>(ldg), hs, H, 1.0f,
           store_.grad(u_[d]), H);
    }
  }
  if (gru) add_column_sums(dg_all, int64_t{T} * B, GH, ldg, store_.grad(hidden_bias_[d]));
  if (!batch_norm_)
    add_column_sums(dpre + d * GH, int64_t{T} * B, GH, P, store_.grad(input_bias_[d]));
}

}  // namespace ds2
