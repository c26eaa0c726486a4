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

// The cuDNN objects one benchmark row uses, released in any case.
struct CudnnRnn {
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnTensorDescriptor_t m = nullptr, b = nullptr;
  ~CudnnRnn() {
    if (rnn) cudnnDestroyRNNDescriptor(rnn);
    if (m) cudnnDestroyTensorDescriptor(m);
    if (b) cudnnDestroyTensorDescriptor(b);
  }
};

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
