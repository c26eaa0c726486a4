#include "nn/cuda/conv2d_cuda.h"

#include <algorithm>

#include "core/error.h"

namespace ds2 {

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
      bias_(cpu.bias()) {}

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

int CudaConv2d::list_frames(const DeviceSequences& seq, int T, int B, DeviceArray<int>& frames) {
  int64_t count = 0;
  for (int b = 0; b < B; ++b) count += std::min(seq.lengths[b], T);
  DS2_CHECK(count < (int64_t{1} << 31), name_ << ": " << count << " frames exceed 32-bit indexing");
  if (count == 0) return 0;
  frames.reserve(count);
  kernels::conv2d_list_frames(seq.device_lengths.data(), T, B, frames.data(), ctx_.stream());
  return static_cast<int>(count);
}

kernels::Conv2dWorkspace CudaConv2d::workspace(const kernels::Conv2dGeometry& g, int out_count,
                                               bool weight_grad) {
  const kernels::Conv2dWorkspaceSizes sizes =
      kernels::conv2d_workspace_sizes(g, out_count, weight_grad);
  positions_.reserve(std::max<int64_t>(1, sizes.positions));
  out_offsets_.reserve(std::max<int64_t>(1, sizes.positions));
  taps_.reserve(std::max<int64_t>(1, sizes.taps));
  if (weight_grad) partials_.reserve(std::max<int64_t>(1, sizes.partials));
  fragments_.reserve(std::max<int64_t>(1, sizes.fragments));
  kernels::Conv2dWorkspace ws;
  ws.positions = positions_.data();
  ws.out_offsets = out_offsets_.data();
  ws.taps = taps_.data();
  ws.partials = partials_.data();
  ws.fragments = fragments_.data();
  return ws;
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
  const int out_count = list_frames(out, g.T_out, g.B, out_frames_);
  if (out_count == 0 || g.F_out == 0) return;
  const kernels::Conv2dWorkspace ws = workspace(g, out_count, /*weight_grad=*/false);
  kernels::conv2d_forward(in.data.data(), in.device_lengths.data(), out.device_lengths.data(),
                          params_.value(weight_), with_bias_ ? params_.value(bias_) : nullptr,
                          out_frames_.data(), out_count, g, ws, ctx_.matmul_precision(),
                          out.data.data(), stream);
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
  const int out_count = list_frames(out, g.T_out, g.B, out_frames_);
  const kernels::Conv2dWorkspace ws = workspace(g, out_count, /*weight_grad=*/true);
  if (out_count > 0 && g.F_out > 0) {
    // Nothing later in backward reads the weight gradient: it may overlap the input gradient and
    // the layers below (CudaContext). It uses the positions and partials, backward-data the taps.
    kernels::conv2d_backward_weights(
        in.data.data(), in.device_lengths.data(), grad_out.data.data(), out.device_lengths.data(),
        out_frames_.data(), out_count, g, ws, ctx_.matmul_precision(), params_.grad(weight_),
        with_bias_ ? params_.grad(bias_) : nullptr, ctx_.fork_weight_gradients());
  }
  if (!needs_input_grad_) return;
  grad_in.data.resize(in.data.shape());
  grad_in.copy_lengths(in, stream);
  // The kernel writes every valid input frame (zeros where no output reads it); padding frames
  // are zeroed here.
  zero_padding(grad_in, stream);
  const int in_count = list_frames(in, g.T, g.B, in_frames_);
  if (in_count == 0) return;
  kernels::conv2d_backward_data(grad_out.data.data(), out.device_lengths.data(),
                                in.device_lengths.data(), params_.value(weight_), in_frames_.data(),
                                in_count, g, ws, ctx_.matmul_precision(), grad_in.data.data(),
                                stream);
}

}  // namespace ds2
