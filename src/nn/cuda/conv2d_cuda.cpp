#include "nn/cuda/conv2d_cuda.h"

#include <algorithm>

#include "core/cuda/gemm.h"
#include "core/error.h"
#include "kernels/elementwise.h"

namespace ds2 {

namespace {
// Default im2col workspace in floats (64 MiB): big enough that a chunk's GEMM keeps the GPU busy
// (about 55 frames of the second DS2 conv, thousands of the first), small beside the model.
constexpr int64_t kDefaultColumnBudget = int64_t{1} << 26;
}  // namespace

CudaConv2d::CudaConv2d(CudaContext& ctx, DeviceParameters& params, const Conv2d& cpu)
    : ctx_(ctx),
      params_(params),
      name_(cpu.name()),
      in_channels_(cpu.in_channels()),
      out_channels_(cpu.out_channels()),
      kernel_t_(cpu.kernel_t()),
      kernel_f_(cpu.kernel_f()),
      stride_t_(cpu.stride_t()),
      stride_f_(cpu.stride_f()),
      with_bias_(cpu.with_bias()),
      weight_(cpu.weight()),
      bias_(cpu.bias()),
      column_budget_(kDefaultColumnBudget) {}

int CudaConv2d::output_length(int input_length) const {
  if (input_length <= 0) return 0;
  return (input_length + 2 * (kernel_t_ / 2) - kernel_t_) / stride_t_ + 1;
}

int CudaConv2d::output_freq(int input_freq) const {
  if (input_freq <= 0) return 0;
  return (input_freq + 2 * (kernel_f_ / 2) - kernel_f_) / stride_f_ + 1;
}

kernels::Conv2dGeometry CudaConv2d::geometry(const DeviceSequences& in) const {
  check_sequences(in, name_);
  const Shape& s = in.data.shape();
  const bool ok = (s.size() == 3 && in_channels_ == 1) || (s.size() == 4 && s[2] == in_channels_);
  DS2_CHECK(ok, name_ << ": input shape " << shape_str(s) << " does not have " << in_channels_
                      << " channel(s)");
  kernels::Conv2dGeometry g;
  g.T = static_cast<int>(s[0]);
  g.B = static_cast<int>(s[1]);
  g.C = in_channels_;
  g.F = static_cast<int>(s.back());
  g.T_out = output_length(g.T);
  g.C_out = out_channels_;
  g.F_out = output_freq(g.F);
  g.kernel_t = kernel_t_;
  g.kernel_f = kernel_f_;
  g.stride_t = stride_t_;
  g.stride_f = stride_f_;
  return g;
}

void CudaConv2d::list_frames(const DeviceSequences& out, const kernels::Conv2dGeometry& g) {
  valid_frames_.clear();  // keeps its capacity: no host allocation once the largest batch ran
  for (int t = 0; t < g.T_out; ++t)
    for (int b = 0; b < g.B; ++b)
      if (t < out.lengths[b]) valid_frames_.push_back(t * g.B + b);
  const int64_t slots = int64_t{g.T_out} * g.B;
  if (slots == 0) return;
  frames_.reserve(std::max<int64_t>(1, static_cast<int64_t>(valid_frames_.size())));
  frame_index_.reserve(slots);
  kernels::conv2d_list_frames(out.device_lengths.data(), g.T_out, g.B, frames_.data(),
                              frame_index_.data(), ctx_.stream());
}

int CudaConv2d::frames_per_chunk(const kernels::Conv2dGeometry& g) const {
  const int64_t per_frame = g.patch_size() * std::max(1, g.F_out);
  const int64_t frames = std::max<int64_t>(1, column_budget_ / per_frame);
  return static_cast<int>(std::min<int64_t>(frames, int64_t{1} << 30));
}

void CudaConv2d::reserve_workspace(const kernels::Conv2dGeometry& g, int chunk) {
  const int64_t rows = int64_t{chunk} * g.F_out;
  col_.reserve(rows * g.patch_size());
  gemm_out_.reserve(rows * g.C_out);
}

void CudaConv2d::forward(const DeviceSequences& in, DeviceSequences& out, bool /*training*/) {
  const kernels::Conv2dGeometry g = geometry(in);
  const cudaStream_t stream = ctx_.stream();
  out.data.resize({g.T_out, g.B, g.C_out, g.F_out});
  out_lengths_.resize(g.B);
  for (int b = 0; b < g.B; ++b) out_lengths_[b] = output_length(in.lengths[b]);
  out.set_lengths(out_lengths_, stream);
  // Padding frames are never written below; valid frames all are.
  zero_padding(out, stream);
  list_frames(out, g);
  const int total = static_cast<int>(valid_frames_.size());
  if (total == 0 || g.F_out == 0) return;

  const int chunk = std::min(frames_per_chunk(g), total);
  reserve_workspace(g, chunk);
  const int K = static_cast<int>(g.patch_size());
  const float* w = params_.value(weight_);
  const float* bias = with_bias_ ? params_.value(bias_) : nullptr;
  for (int start = 0; start < total; start += chunk) {
    const int count = std::min(chunk, total - start);
    const int N = count * g.F_out;
    const int* frames = frames_.data() + start;
    kernels::conv2d_im2col(in.data.data(), in.device_lengths.data(), frames, count, g, col_.data(),
                           stream);
    // gemm_out {C_out, N} = W {C_out, K} * col^T; column (j, f') is frame j at frequency f'.
    gemm(ctx_, false, true, g.C_out, N, K, 1.0f, w, K, col_.data(), K, 0.0f, gemm_out_.data(), N);
    kernels::conv2d_scatter_output(gemm_out_.data(), bias, frames, count, g, out.data.data(),
                                   stream);
  }
}

void CudaConv2d::backward(const DeviceSequences& in, const DeviceSequences& out,
                          const DeviceSequences& grad_out, DeviceSequences& grad_in) {
  const kernels::Conv2dGeometry g = geometry(in);
  const cudaStream_t stream = ctx_.stream();
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  DS2_CHECK(out.data.shape() == (Shape{g.T_out, g.B, g.C_out, g.F_out}) &&
                static_cast<int>(out.lengths.size()) == g.B,
            name_ << ": output shape " << shape_str(out.data.shape())
                  << " is not the forward's for input " << shape_str(in.data.shape()));
  for (int b = 0; b < g.B; ++b)
    DS2_CHECK(out.lengths[b] == output_length(in.lengths[b]),
              name_ << ": output length " << out.lengths[b] << " of utterance " << b
                    << " is not the forward's for input length " << in.lengths[b]);
  if (needs_input_grad_) {
    grad_in.data.resize(in.data.shape());
    grad_in.copy_lengths(in, stream);
    // The gather below adds only into valid frames; padding stays exactly zero.
    kernels::fill(grad_in.data.data(), grad_in.data.numel(), 0.0f, stream);
  }
  list_frames(out, g);
  const int total = static_cast<int>(valid_frames_.size());
  if (total == 0 || g.F_out == 0) return;

  const int chunk = std::min(frames_per_chunk(g), total);
  reserve_workspace(g, chunk);
  const int K = static_cast<int>(g.patch_size());
  const float* w = params_.value(weight_);
  float* dw = params_.grad(weight_);
  float* dbias = with_bias_ ? params_.grad(bias_) : nullptr;
  for (int start = 0; start < total; start += chunk) {
    const int count = std::min(chunk, total - start);
    const int N = count * g.F_out;
    const int* frames = frames_.data() + start;
    float* dy_rows = gemm_out_.data();  // {N, C_out}
    kernels::conv2d_gather_grad_output(grad_out.data.data(), frames, count, g, dy_rows, stream);
    if (dbias) kernels::column_sum(dy_rows, N, g.C_out, dbias, /*accumulate=*/true, stream);
    kernels::conv2d_im2col(in.data.data(), in.device_lengths.data(), frames, count, g, col_.data(),
                           stream);
    // dW {C_out, K} += dY^T {C_out, N} * col {N, K}
    gemm(ctx_, true, false, g.C_out, K, N, 1.0f, dy_rows, g.C_out, col_.data(), K, 1.0f, dw, K);
    if (!needs_input_grad_) continue;
    // d col {N, K} = dY {N, C_out} * W {C_out, K}, overwriting the patches (stream-ordered after
    // the dW GEMM that read them), then folded back onto the input frames this chunk read.
    gemm(ctx_, false, false, N, K, g.C_out, 1.0f, dy_rows, g.C_out, w, K, 0.0f, col_.data(), K);
    const int t_first = valid_frames_[start] / g.B;
    const int t_last = valid_frames_[start + count - 1] / g.B;
    const int t_begin = std::max(0, t_first * g.stride_t - g.kernel_t / 2);
    const int t_end = std::min(g.T, t_last * g.stride_t - g.kernel_t / 2 + g.kernel_t);
    kernels::conv2d_col2im(col_.data(), in.device_lengths.data(), frame_index_.data(), start, count,
                           t_begin, t_end, g, grad_in.data.data(), stream);
  }
}

}  // namespace ds2
