// cuDNN plumbing shared by the benchmarks that time cuDNN's RNN beside ours (`ds2 bench rnn`,
// `ds2 bench stack`): status checks, descriptor owners, element types, and the shared
// descriptors of a {T, B, H} sequence-major problem. Only in builds that found cuDNN.
//
//   CudnnShared c;
//   setup_cudnn(c, stream, H, B, T, CUDNN_DATA_HALF, /*layers=*/1);
//   DeviceArray<float> x16;  upload_as(host_x, CUDNN_DATA_HALF, x16, stream);
#pragma once

#ifdef DS2_HAVE_CUDNN

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/cuda/device_array.h"
#include "core/error.h"

#define DS2_CUDNN_CHECK(expr)                                            \
  do {                                                                   \
    const cudnnStatus_t ds2_cudnn_status_ = (expr);                      \
    if (ds2_cudnn_status_ != CUDNN_STATUS_SUCCESS)                       \
      DS2_FAIL(#expr << ": " << cudnnGetErrorString(ds2_cudnn_status_)); \
  } while (0)

namespace ds2 {

struct CudnnShared {
  cudnnHandle_t handle = nullptr;
  cudnnDropoutDescriptor_t dropout = nullptr;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t h = nullptr;
  DeviceArray<float> dropout_states;
  DeviceArray<int> seq_lengths;
  ~CudnnShared() {
    if (x) cudnnDestroyRNNDataDescriptor(x);
    if (y) cudnnDestroyRNNDataDescriptor(y);
    if (h) cudnnDestroyTensorDescriptor(h);
    if (dropout) cudnnDestroyDropoutDescriptor(dropout);
    if (handle) cudnnDestroy(handle);
  }
};

// One cuDNN RNN (ReLU, or `cell` CUDNN_GRU; unidirectional, input and hidden width H, fp32 math
// precision) with its weight (zero-filled), work and reserve spaces, all released in any case.
struct CudnnRnn {
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnTensorDescriptor_t m = nullptr, b = nullptr;  // for cudnnGetRNNWeightParams
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  DeviceArray<float> weights, work, reserve;

  // Throws ds2::Error (naming the call) where cuDNN refuses the combination.
  CudnnRnn(CudnnShared& c, cudnnRNNAlgo_t algo, cudnnRNNBiasMode_t bias, cudnnRNNInputMode_t input,
           cudnnDataType_t dtype, cudnnMathType_t math, int H, int layers, int B,
           cudaStream_t stream, cudnnRNNMode_t cell = CUDNN_RNN_RELU);
  ~CudnnRnn();
  CudnnRnn(const CudnnRnn&) = delete;
  CudnnRnn& operator=(const CudnnRnn&) = delete;
  // Training-mode forward (the reserve space kept for backward), zero initial state; then
  // backward-data from that forward's y.
  void forward(CudnnShared& c, const void* x, void* y);
  void backward_data(CudnnShared& c, const void* y, const void* dy, void* dx);
};

size_t element_bytes(cudnnDataType_t t);
const char* dtype_name(cudnnDataType_t t);
// Host values in cuDNN's element type `t` on the device (a float array sized in whole floats),
// and back.
void upload_as(const std::vector<float>& v, cudnnDataType_t t, DeviceArray<float>& dst,
               cudaStream_t stream);
std::vector<float> download_as(const void* src, int64_t n, cudnnDataType_t t, cudaStream_t stream);
// Handle on `stream`, a zero dropout, all B sequences T long, x and y {T, B, H} sequence-major,
// and h {layers, B, H}.
void setup_cudnn(CudnnShared& c, cudaStream_t stream, int H, int B, int T, cudnnDataType_t dtype,
                 int layers);

}  // namespace ds2

#endif  // DS2_HAVE_CUDNN
