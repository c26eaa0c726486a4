// CudaContext: what every GPU op of one training process shares: the device, the main stream
// every op is ordered on, a side stream (the backward direction of a bidirectional RNN runs on
// it), a weight-gradient stream, the cuBLAS handles bound to the main and weight-gradient
// streams, and a small device scratch for reductions.
//
//   ds2::CudaContext ctx(/*device=*/0);
//   my_kernel<<<grid, block, 0, ctx.stream()>>>(...);
//   ds2::gemm(ctx, ...);                        // kernels/gemm.h, on ctx.stream()
//   ctx.synchronize();                          // waits for everything queued so far
//
// One context per thread that drives the GPU; not thread-safe.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/cuda/device_array.h"
#include "core/precision.h"

namespace ds2 {

class CudaContext {
 public:
  explicit CudaContext(int device = 0);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudaStream_t side_stream() const { return side_stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  // How this context's GEMMs and persistent RNN layers compute (core/precision.h); fp32 unless
  // set (mixed-precision training sets bf16).
  Precision matmul_precision() const { return matmul_precision_; }
  void set_matmul_precision(Precision p) { matmul_precision_ = p; }
  // Fixed cuBLAS workspaces (for the main handle, and for handles bound to the side stream), so
  // cuBLAS never allocates on its own, which CUDA graph capture requires.
  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
  void* side_cublas_workspace() { return side_workspace_.data(); }
  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)"
  const std::string& description() const { return description_; }
  int sm_count() const { return sm_count_; }

  // The side stream waits for work queued so far on the main stream, and the reverse.
  void fork_to_side();
  void join_from_side();
  void synchronize();

  // Deferred weight gradients. Work that only accumulates parameter gradients (nothing later in
  // backward reads it) may run on the weight-gradient stream, where it overlaps the layers below
  // instead of delaying them. CudaModel::backward turns deferral on and joins at its end; off,
  // the weight-gradient stream and handle are the main ones, so a layer used alone behaves as
  // before.
  //   cudaStream_t s = ctx.fork_weight_gradients();  // waits for the main stream so far
  //   gemm(ctx.weight_gradient_cublas(), ...);        // queued on s
  //   ctx.record_gradients_final(event);  // fires when every gradient queued so far is final
  //   ctx.join_weight_gradients();        // the main stream waits for them
  void set_defer_weight_gradients(bool on) { defer_weight_gradients_ = on; }
  bool defers_weight_gradients() const { return defer_weight_gradients_; }
  cudaStream_t fork_weight_gradients();
  cublasHandle_t weight_gradient_cublas() const {
    return defer_weight_gradients_ ? weight_cublas_ : cublas_;
  }
  void record_gradients_final(cudaEvent_t event);
  void join_weight_gradients();
  // At least n floats of scratch for work queued on the weight-gradient stream, which orders
  // every layer's use of it (nn/cuda/rnn_layer_cuda.cpp's padded weight gradients). Grows on
  // first use of a larger n (cudaFree waits for the device), then is reused.
  float* weight_gradient_scratch(int64_t n);

 private:
  int device_;
  cudaStream_t stream_ = nullptr, side_stream_ = nullptr, weight_stream_ = nullptr;
  cudaEvent_t fork_event_ = nullptr, join_event_ = nullptr;
  cudaEvent_t weight_fork_event_ = nullptr, weight_join_event_ = nullptr;
  cublasHandle_t cublas_ = nullptr, weight_cublas_ = nullptr;
  bool defer_weight_gradients_ = false;
  Precision matmul_precision_ = Precision::kFp32;
  DeviceArray<uint8_t> workspace_, side_workspace_, weight_workspace_;
  DeviceArray<float> weight_scratch_;
  std::string description_;
  int sm_count_ = 0;
};

// A cuBLAS handle bound to `stream` with a fixed workspace, set up as every handle of the project
// is: no TF32, no atomics (bit-reproducible). The caller destroys it.
cublasHandle_t make_cublas_handle(cudaStream_t stream, void* workspace, size_t workspace_bytes);

// True when this build has CUDA and the machine shows at least one device; `why` says why not.
bool cuda_available(std::string* why = nullptr);

}  // namespace ds2
