#include "nn/cuda/rnn_stack.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <sstream>

#include "core/cuda/check.h"
#include "core/cuda/gemm.h"
#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/rnn.h"

namespace ds2 {
namespace {

// The projection and carry-in GEMMs of a chunk are small; a few MB of cuBLAS workspace per
// stream is plenty and keeps eight streams' worth modest.
constexpr size_t kStreamBlasWorkspaceBytes = size_t{4} << 20;

int chunks_of(int steps, int chunk) {
  return (steps + chunk - 1) / chunk;
}

// Wavefront graphs kept per pass: one per number of chunks, for utterances of up to 16 chunks
// (with 32-step chunks at 100 frames/s after a stride of 2, about 10 s) without recapturing.
constexpr size_t kWavefrontGraphs = 16;

// What a replayed graph depends on: its extent (T, or the number of chunks), the batch and the
// device pointers. Lengths are read from device memory when the graph runs.
std::vector<int64_t> graph_key(int extent, int B, std::initializer_list<const float*> pointers,
                               const std::vector<RnnStackWeights>& weights) {
  std::vector<int64_t> key = {extent, B};
  for (const float* p : pointers) key.push_back(reinterpret_cast<int64_t>(p));
  for (const RnnStackWeights& w : weights)
    for (const float* p : {w.w, w.u, w.bias}) key.push_back(reinterpret_cast<int64_t>(p));
  return key;
}

}  // namespace

CudaRnnStack::CudaRnnStack(CudaContext& ctx, int layers, int input, int hidden, int max_batch,
                           int max_steps, Precision precision, bool residual, int chunk,
                           float relu_clip)
    : ctx_(ctx),
      layers_(layers),
      input_(input),
      hidden_(hidden),
      max_batch_(max_batch),
      max_steps_(max_steps),
      chunk_(chunk),
      padded_steps_(chunks_of(std::max(max_steps, 1), std::max(chunk, 1)) * std::max(chunk, 1)),
      precision_(precision),
      residual_(residual),
      relu_clip_(relu_clip),
      wavefront_graph_(kWavefrontGraphs),
      backward_wavefront_graph_(kWavefrontGraphs) {
  DS2_CHECK(layers >= 1 && input >= 1 && hidden >= 1 && max_batch >= 1 && max_steps >= 1,
            "CudaRnnStack: layers, input, hidden, max_batch and max_steps must be positive (got "
                << layers << ", " << input << ", " << hidden << ", " << max_batch << ", "
                << max_steps << ")");
  DS2_CHECK(chunk >= 1, "CudaRnnStack: chunk must be at least 1 step (got " << chunk << ")");
  // The wavefront needs the cluster kernel (co-resident launches): ahead of the tagged grid one.
  plan_ = std::make_unique<PersistentRnnPlan>(hidden, max_batch, 1, ctx.device(), precision,
                                              kClusterBeforeGrid);
  DS2_CHECK(plan_->fits(), "CudaRnnStack: no persistent plan for hidden "
                               << hidden << ", batch " << max_batch << ": " << plan_->why_not());
  if (!plan_->tiling().cluster) {
    why_not_ =
        "the plan is not the thread-block cluster kernel (bf16, hidden <= 1024, batch <= 8): a "
        "grid-wide persistent kernel must own its SMs";
  } else if (layers < 2) {
    why_not_ = "one layer";
  } else {
    const int clusters = kernels::prnn_kernel_info(plan_->tiling()).max_clusters;
    concurrent_ = std::max(1, std::min(layers, clusters));
    if (concurrent_ < 2) why_not_ = "the GPU holds one cluster of this plan at a time";
  }
  if (!why_not_.empty()) concurrent_ = 1;

  const int64_t per_layer = int64_t{padded_steps_} * max_batch * hidden;
  pre_.reserve(per_layer * layers);
  h_.reserve(per_layer * layers);
  outputs_.reserve(std::max<int64_t>(1, per_layer * (layers - 1)));
  grad_stage_.reserve(per_layer * layers);
  grad_links_.reserve(std::max<int64_t>(1, per_layer * (layers - 1)));
  const size_t ws = std::max<size_t>(plan_->workspace_bytes(), sizeof(float));
  workspace_.reserve(static_cast<int64_t>((ws + sizeof(float) - 1) / sizeof(float)) * concurrent_);
  if (concurrent_ > 1) {
    const int64_t rows = int64_t{padded_steps_} * max_batch;
    x_pad_.reserve(rows * input);
    dx_pad_.reserve(rows * input);
    y_pad_.reserve(per_layer);
    dy_pad_.reserve(per_layer);
  }
  const int max_chunks = chunks_of(max_steps, chunk);
  chunk_lengths_.reserve(int64_t{max_chunks} * max_batch);
  host_chunk_lengths_.resize(static_cast<size_t>(max_chunks) * max_batch);

  if (concurrent_ > 1) {
    blas_workspace_.reserve(static_cast<int64_t>(kStreamBlasWorkspaceBytes) * concurrent_);
    for (int s = 0; s < concurrent_; ++s) {
      cudaStream_t stream = nullptr;
      DS2_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      streams_.push_back(stream);
      handles_.push_back(make_cublas_handle(
          stream, blas_workspace_.data() + static_cast<int64_t>(kStreamBlasWorkspaceBytes) * s,
          kStreamBlasWorkspaceBytes));
    }
    chunk_done_.resize(static_cast<size_t>(layers) * max_chunks);
    for (cudaEvent_t& e : chunk_done_)
      DS2_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    layer_done_.resize(static_cast<size_t>(layers));
    for (cudaEvent_t& e : layer_done_)
      DS2_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    DS2_CUDA_CHECK(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming));
  }
}

CudaRnnStack::~CudaRnnStack() {
  // Errors ignored: destructors must not throw.
  for (cudaEvent_t e : chunk_done_) cudaEventDestroy(e);
  for (cudaEvent_t e : layer_done_) cudaEventDestroy(e);
  if (start_) cudaEventDestroy(start_);
  for (cublasHandle_t h : handles_) cublasDestroy(h);
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
}

void CudaRnnStack::set_use_graphs(bool on) {
  for (StepGraph* g : {&sequential_graph_, &wavefront_graph_, &backward_sequential_graph_,
                       &backward_wavefront_graph_})
    g->set_enabled(on);
}

std::string CudaRnnStack::describe() const {
  std::ostringstream s;
  s << layers_ << " layers of " << hidden_ << ", chunks of " << chunk_ << " steps, ";
  if (wavefront_possible())
    s << "wavefront: up to " << concurrent_ << " layers at once";
  else
    s << "sequential only (" << why_not_ << ")";
  s << " (plan: " << plan_->describe() << ")";
  return s.str();
}

int64_t CudaRnnStack::layer_offset(int l) const {
  return int64_t{l} * padded_steps_ * max_batch_ * hidden_;
}

cudaStream_t CudaRnnStack::stream_of(int slot) const {
  return slot < 0 ? ctx_.stream() : streams_[slot];
}

cublasHandle_t CudaRnnStack::blas_of(int slot) const {
  return slot < 0 ? ctx_.cublas() : handles_[slot];
}

float* CudaRnnStack::h_of(int l, float* y) {
  if (l == layers_ - 1 && !adds_input(l)) return y;
  return h_.data() + layer_offset(l);
}

float* CudaRnnStack::output_of(int l, float* y) {
  if (!adds_input(l)) return h_of(l, y);
  if (l == layers_ - 1) return y;
  return outputs_.data() + layer_offset(l);
}

const float* CudaRnnStack::input_of(int l, const float* x, float* y) {
  return l == 0 ? x : output_of(l - 1, y);
}

void CudaRnnStack::run_chunk(int l, const float* x, const RnnStackWeights& w, float* h, float* y,
                             int t0, int steps, int B, const int* chunk_lengths, int slot) {
  const int H = hidden_, in = layer_input(l);
  cudaStream_t stream = stream_of(slot);
  cublasHandle_t blas = blas_of(slot);
  float* pre = pre_.data() + layer_offset(l) + int64_t{t0} * B * H;
  const int64_t rows = int64_t{steps} * B;
  // pre = x W^T + b for the chunk's steps.
  gemm(blas, precision_, false, true, static_cast<int>(rows), H, in, 1.0f, x + int64_t{t0} * B * in,
       in, w.w, in, 0.0f, pre, H);
  kernels::add_row_bias(pre, w.bias, rows, H, stream);
  // Carry-in: the chunk's first step gets U h_{t0-1} (zero rows where utterances have ended).
  if (t0 > 0)
    gemm(blas, precision_, false, true, B, H, H, 1.0f, h + int64_t{t0 - 1} * B * H, H, w.u, H, 1.0f,
         pre, H);
  const int64_t ws_floats = workspace_.capacity() / concurrent_;
  persistent_rnn_forward(*plan_, w.u, pre, H, h + int64_t{t0} * B * H, chunk_lengths, steps, B,
                         /*reverse=*/false, relu_clip_,
                         workspace_.data() + ws_floats * std::max(slot, 0),
                         static_cast<size_t>(ws_floats) * sizeof(float), stream);
  if (!adds_input(l)) return;
  // y = h + x in one pass (the kernel that sums a layer's two directions); padding stays zero
  // since both are.
  kernels::rnn_sum_directions(h + int64_t{t0} * B * H, x + int64_t{t0} * B * in,
                              y + int64_t{t0} * B * H, rows * H, stream);
}

void CudaRnnStack::forward(const float* x, const std::vector<RnnStackWeights>& weights,
                           const std::vector<int>& lengths, const int* device_lengths, int T, int B,
                           bool wavefront, float* y) {
  check_call("forward", weights.size(), lengths, T, B);

  cudaStream_t main = ctx_.stream();
  // Replayed as CUDA graphs when the same shapes and pointers come again: a wavefront of short
  // chunks is otherwise bound by the host's launch rate (five launches per chunk). The kernels
  // read the lengths from device memory, so they are not part of the key.
  if (!wavefront || !wavefront_possible()) {
    std::vector<int64_t> key = graph_key(T, B, {x, y}, weights);
    key.push_back(reinterpret_cast<int64_t>(device_lengths));
    sequential_graph_.run(key, main, [&] {
      for (int l = 0; l < layers_; ++l)
        run_chunk(l, input_of(l, x, y), weights[l], h_of(l, y), output_of(l, y), 0, T, B,
                  device_lengths, -1);
    });
    return;
  }

  const int chunks = upload_chunk_lengths(lengths, T, B);
  const int rows = chunks * chunk_;
  float* xp = x_pad_.data();
  float* yp = y_pad_.data();
  stage_padded(x, T, rows, B, input_, xp);
  wavefront_graph_.run(graph_key(chunks, B, {}, weights), main, [&] {
    record_wavefront(
        chunks, /*backward=*/false,
        [&](int l, int c, int slot) {
          run_chunk(l, input_of(l, xp, yp), weights[l], h_of(l, yp), output_of(l, yp), c * chunk_,
                    chunk_, B, chunk_lengths_.data() + int64_t{c} * B, slot);
        },
        nullptr);
  });
  DS2_CUDA_CHECK(
      cudaMemcpyAsync(y, yp, sizeof(float) * T * B * hidden_, cudaMemcpyDeviceToDevice, main));
}

void CudaRnnStack::stage_padded(const float* src, int T, int rows, int B, int width,
                                float* padded) {
  const int64_t frame = int64_t{B} * width;
  DS2_CUDA_CHECK(cudaMemcpyAsync(padded, src, sizeof(float) * T * frame, cudaMemcpyDeviceToDevice,
                                 ctx_.stream()));
  if (rows > T)
    DS2_CUDA_CHECK(
        cudaMemsetAsync(padded + T * frame, 0, sizeof(float) * (rows - T) * frame, ctx_.stream()));
}

void CudaRnnStack::check_call(const char* what, size_t layers, const std::vector<int>& lengths,
                              int T, int B) const {
  DS2_CHECK(static_cast<int>(layers) == layers_, "CudaRnnStack::" << what << ": " << layers
                                                                  << " layers of weights for a "
                                                                     "stack of "
                                                                  << layers_);
  DS2_CHECK(T >= 1 && T <= max_steps_ && B >= 1 && B <= max_batch_ &&
                static_cast<int>(lengths.size()) == B,
            "CudaRnnStack::" << what << ": T " << T << " (max " << max_steps_ << "), B " << B
                             << " (max " << max_batch_ << "), " << lengths.size() << " lengths");
  for (int len : lengths)
    DS2_CHECK(len >= 0 && len <= T,
              "CudaRnnStack::" << what << ": length " << len << " outside [0, " << T << "]");
}

int CudaRnnStack::upload_chunk_lengths(const std::vector<int>& lengths, int T, int B) {
  // Each chunk's lengths relative to its first step, capped at its length, uploaded once (before
  // any graph: the copy reads host memory that a replay would not refill).
  const int chunks = chunks_of(T, chunk_);
  for (int c = 0; c < chunks; ++c)
    for (int b = 0; b < B; ++b)
      host_chunk_lengths_[static_cast<size_t>(c) * B + b] =
          std::clamp(lengths[b] - c * chunk_, 0, std::min(chunk_, T - c * chunk_));
  lengths_staging_.copy(host_chunk_lengths_.data(), sizeof(int) * chunks * B, chunk_lengths_.data(),
                        ctx_.stream());
  return chunks;
}

void CudaRnnStack::record_wavefront(int chunks, bool backward,
                                    const std::function<void(int l, int c, int slot)>& unit,
                                    const std::function<void(int l, int slot)>& finish) {
  cudaStream_t main = ctx_.stream();
  DS2_CUDA_CHECK(cudaEventRecord(start_, main));
  for (cudaStream_t s : streams_) DS2_CUDA_CHECK(cudaStreamWaitEvent(s, start_, 0));
  // Issued along the anti-diagonals r + q = d (r: layers from the first one the pass visits, q:
  // chunks likewise): every event is recorded before it is waited on, and a stream serving
  // several layers gets their chunks in an order that respects both dependencies (the feeding
  // layer's chunk c, the layer's own previous chunk).
  const int max_chunks = chunks_of(max_steps_, chunk_);
  auto done = [&](int l, int c) { return chunk_done_[static_cast<size_t>(l) * max_chunks + c]; };
  for (int d = 0; d < layers_ + chunks - 1; ++d) {
    for (int r = std::max(0, d - chunks + 1); r <= std::min(d, layers_ - 1); ++r) {
      const int l = backward ? layers_ - 1 - r : r;
      const int c = backward ? chunks - 1 - (d - r) : d - r;
      const int feeder = backward ? l + 1 : l - 1;
      const int slot = l % concurrent_;
      cudaStream_t s = streams_[slot];
      if (feeder >= 0 && feeder < layers_)
        DS2_CUDA_CHECK(cudaStreamWaitEvent(s, done(feeder, c), 0));
      unit(l, c, slot);
      DS2_CUDA_CHECK(cudaEventRecord(done(l, c), s));
      if (c == (backward ? 0 : chunks - 1)) {
        if (finish) finish(l, slot);
        DS2_CUDA_CHECK(cudaEventRecord(layer_done_[l], s));
      }
    }
  }
  // The main stream continues once every layer's last work is done, which also joins the
  // streams back for a graph capture.
  for (cudaEvent_t e : layer_done_) DS2_CUDA_CHECK(cudaStreamWaitEvent(main, e, 0));
}

const float* CudaRnnStack::grad_into(int l, const float* dy) {
  if (l == layers_ - 1) return dy;
  return grad_links_.data() + layer_offset(l);
}

float* CudaRnnStack::grad_out_of(int l, float* dx) {
  if (l == 0) return dx;
  return grad_links_.data() + layer_offset(l - 1);
}

void CudaRnnStack::run_backward_chunk(int l, const RnnStackWeights& w, const float* h,
                                      const float* g, float* dx, int t0, int steps, int T, int B,
                                      const int* chunk_lengths, int slot) {
  const int H = hidden_, in = layer_input(l);
  cudaStream_t stream = stream_of(slot);
  cublasHandle_t blas = blas_of(slot);
  float* dpre = pre_.data() + layer_offset(l);
  const int64_t rows = int64_t{steps} * B, first = int64_t{t0} * B;
  const int t1 = t0 + steps;
  // dL/dh of the chunk; the last chunk reads g itself, the others a copy whose last row gets the
  // carry-in dpre_{t1} U (g is read again for the residual below, and may be the caller's dy).
  const float* g_chunk = g + first * H;
  if (t1 < T) {
    float* stage = grad_stage_.data() + layer_offset(l) + first * H;
    DS2_CUDA_CHECK(cudaMemcpyAsync(stage, g_chunk, rows * H * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
    gemm(blas, precision_, false, false, B, H, H, 1.0f, dpre + int64_t{t1} * B * H, H, w.u, H, 1.0f,
         stage + (rows - B) * H, H);
    g_chunk = stage;
  }
  const int64_t ws_floats = workspace_.capacity() / concurrent_;
  persistent_rnn_backward_data(*plan_, w.u, h + first * H, g_chunk, H, dpre + first * H, H,
                               chunk_lengths, steps, B, /*reverse=*/false, relu_clip_,
                               workspace_.data() + ws_floats * std::max(slot, 0),
                               static_cast<size_t>(ws_floats) * sizeof(float), stream);
  // dx = dpre W (+ dL/dy straight through the residual).
  const bool residual = adds_input(l);
  if (residual)
    DS2_CUDA_CHECK(cudaMemcpyAsync(dx + first * in, g + first * H, rows * H * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
  gemm(blas, precision_, false, false, static_cast<int>(rows), in, H, 1.0f, dpre + first * H, H,
       w.w, in, residual ? 1.0f : 0.0f, dx + first * in, in);
}

void CudaRnnStack::layer_weight_gradients(int l, const float* x, const float* h,
                                          const RnnStackGradients& grads, int T, int B, int slot) {
  const int H = hidden_, in = layer_input(l);
  cudaStream_t stream = stream_of(slot);
  cublasHandle_t blas = blas_of(slot);
  const float* dpre = pre_.data() + layer_offset(l);
  const int64_t rows = int64_t{T} * B;
  // dW += dpre^T x, db += sum of dpre, dU += sum over t >= 1 of dpre_t^T h_{t-1} (accumulated,
  // as every layer's gradients: nn/cuda/cuda_layer.h).
  gemm(blas, precision_, true, false, H, in, static_cast<int>(rows), 1.0f, dpre, H, x, in, 1.0f,
       grads.w, in);
  kernels::column_sum(dpre, rows, H, grads.bias, /*accumulate=*/true, stream);
  if (T > 1)
    gemm(blas, precision_, true, false, H, H, static_cast<int>(rows - B), 1.0f,
         dpre + int64_t{B} * H, H, h, H, 1.0f, grads.u, H);
}

void CudaRnnStack::backward(const float* x, const float* y,
                            const std::vector<RnnStackWeights>& weights, const float* dy,
                            const std::vector<int>& lengths, const int* device_lengths, int T,
                            int B, bool wavefront, float* dx,
                            const std::vector<RnnStackGradients>& grads) {
  check_call("backward", weights.size(), lengths, T, B);
  DS2_CHECK(grads.size() == weights.size(), "CudaRnnStack::backward: " << grads.size()
                                                                       << " layers of gradients "
                                                                          "for a stack of "
                                                                       << layers_);
  float* out = const_cast<float*>(y);  // only read: the last layer's h when it adds no input
  cudaStream_t main = ctx_.stream();
  const auto with_grads = [&](std::vector<int64_t> key) {
    for (const RnnStackGradients& g : grads)
      for (const float* p : {g.w, g.u, g.bias}) key.push_back(reinterpret_cast<int64_t>(p));
    return key;
  };

  if (!wavefront || !wavefront_possible()) {
    std::vector<int64_t> key = with_grads(graph_key(T, B, {x, y, dy, dx}, weights));
    key.push_back(reinterpret_cast<int64_t>(device_lengths));
    backward_sequential_graph_.run(key, main, [&] {
      for (int l = layers_ - 1; l >= 0; --l) {
        run_backward_chunk(l, weights[l], h_of(l, out), grad_into(l, dy), grad_out_of(l, dx), 0, T,
                           T, B, device_lengths, -1);
        layer_weight_gradients(l, input_of(l, x, out), h_of(l, out), grads[l], T, B, -1);
      }
    });
    return;
  }

  // As forward, on the padded copies; y_pad still holds the forward's output (the last layer's
  // h when it adds no input), as the per-layer buffers hold its other states.
  const int chunks = upload_chunk_lengths(lengths, T, B);
  const int rows = chunks * chunk_;
  float* xp = x_pad_.data();
  float* yp = y_pad_.data();
  float* dyp = dy_pad_.data();
  float* dxp = dx_pad_.data();
  stage_padded(x, T, rows, B, input_, xp);
  stage_padded(dy, T, rows, B, hidden_, dyp);
  backward_wavefront_graph_.run(with_grads(graph_key(chunks, B, {}, weights)), main, [&] {
    record_wavefront(
        chunks, /*backward=*/true,
        [&](int l, int c, int slot) {
          run_backward_chunk(l, weights[l], h_of(l, yp), grad_into(l, dyp), grad_out_of(l, dxp),
                             c * chunk_, chunk_, rows, B, chunk_lengths_.data() + int64_t{c} * B,
                             slot);
        },
        [&](int l, int slot) {
          layer_weight_gradients(l, input_of(l, xp, yp), h_of(l, yp), grads[l], rows, B, slot);
        });
  });
  DS2_CUDA_CHECK(
      cudaMemcpyAsync(dx, dxp, sizeof(float) * T * B * input_, cudaMemcpyDeviceToDevice, main));
}

}  // namespace ds2
