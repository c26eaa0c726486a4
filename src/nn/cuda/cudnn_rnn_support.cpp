#include "nn/cuda/cudnn_rnn_support.h"

#ifdef DS2_HAVE_CUDNN

#include <cuda_fp16.h>

#include <cstring>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "kernels/elementwise.h"

namespace ds2 {
namespace {

// Host values in cuDNN's element type `t`, as raw bytes.
std::vector<unsigned char> encode(const std::vector<float>& v, cudnnDataType_t t) {
  std::vector<unsigned char> out(v.size() * element_bytes(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == CUDNN_DATA_FLOAT) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t w =
          t == CUDNN_DATA_BFLOAT16 ? float_to_bf16(v[i]) : __half_as_ushort(__float2half_rn(v[i]));
      std::memcpy(out.data() + 2 * i, &w, 2);
    }
  }
  return out;
}

std::vector<float> decode(const std::vector<unsigned char>& bytes, cudnnDataType_t t) {
  std::vector<float> out(bytes.size() / element_bytes(t));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t == CUDNN_DATA_FLOAT) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t w;
      std::memcpy(&w, bytes.data() + 2 * i, 2);
      out[i] = t == CUDNN_DATA_BFLOAT16 ? bf16_to_float(w) : __half2float(__ushort_as_half(w));
    }
  }
  return out;
}

}  // namespace

size_t element_bytes(cudnnDataType_t t) {
  return t == CUDNN_DATA_FLOAT ? 4 : 2;
}

const char* dtype_name(cudnnDataType_t t) {
  return t == CUDNN_DATA_FLOAT ? "fp32" : t == CUDNN_DATA_BFLOAT16 ? "bf16" : "fp16";
}

void upload_as(const std::vector<float>& v, cudnnDataType_t t, DeviceArray<float>& dst,
               cudaStream_t stream) {
  const std::vector<unsigned char> bytes = encode(v, t);
  dst.reserve(static_cast<int64_t>(bytes.size() / sizeof(float) + 1));
  DS2_CUDA_CHECK(
      cudaMemcpyAsync(dst.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream));
  DS2_CUDA_CHECK(cudaStreamSynchronize(stream));  // `bytes` leaves scope
}

std::vector<float> download_as(const void* src, int64_t n, cudnnDataType_t t, cudaStream_t stream) {
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * element_bytes(t));
  DS2_CUDA_CHECK(cudaMemcpyAsync(bytes.data(), src, bytes.size(), cudaMemcpyDeviceToHost, stream));
  DS2_CUDA_CHECK(cudaStreamSynchronize(stream));
  return decode(bytes, t);
}

void setup_cudnn(CudnnShared& c, cudaStream_t stream, int H, int B, int T, cudnnDataType_t dtype,
                 int layers) {
  DS2_CUDNN_CHECK(cudnnCreate(&c.handle));
  DS2_CUDNN_CHECK(cudnnSetStream(c.handle, stream));
  size_t state_bytes = 0;
  DS2_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&c.dropout));
  DS2_CUDNN_CHECK(cudnnDropoutGetStatesSize(c.handle, &state_bytes));
  c.dropout_states.reserve(static_cast<int64_t>(state_bytes / sizeof(float) + 1));
  DS2_CUDNN_CHECK(cudnnSetDropoutDescriptor(c.dropout, c.handle, 0.0f, c.dropout_states.data(),
                                            state_bytes, 0));
  const std::vector<int> lengths(B, T);
  c.seq_lengths.reserve(B);
  DS2_CUDA_CHECK(cudaMemcpyAsync(c.seq_lengths.data(), lengths.data(), B * sizeof(int),
                                 cudaMemcpyHostToDevice, stream));
  // Sequence-major, all lengths T: the same {T, B, H} layout as ours.
  for (cudnnRNNDataDescriptor_t* d : {&c.x, &c.y}) {
    DS2_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(d));
    DS2_CUDNN_CHECK(cudnnSetRNNDataDescriptor(*d, dtype, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T,
                                              B, H, lengths.data(), nullptr));
  }
  const int dims[3] = {layers, B, H}, strides[3] = {B * H, H, 1};
  DS2_CUDNN_CHECK(cudnnCreateTensorDescriptor(&c.h));
  DS2_CUDNN_CHECK(cudnnSetTensorNdDescriptor(c.h, dtype, 3, dims, strides));
}

CudnnRnn::CudnnRnn(CudnnShared& c, cudnnRNNAlgo_t algo, cudnnRNNBiasMode_t bias,
                   cudnnRNNInputMode_t input, cudnnDataType_t dtype, cudnnMathType_t math, int H,
                   int layers, int B, cudaStream_t stream, cudnnRNNMode_t cell) {
  DS2_CUDNN_CHECK(cudnnCreateRNNDescriptor(&rnn));
  DS2_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(rnn, algo, cell, bias, CUDNN_UNIDIRECTIONAL, input,
                                           dtype, CUDNN_DATA_FLOAT, math, H, H, H, layers,
                                           c.dropout, CUDNN_RNN_PADDED_IO_DISABLED));
  if (algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC)
    DS2_CUDNN_CHECK(cudnnBuildRNNDynamic(c.handle, rnn, B));
  DS2_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(c.handle, rnn, &weight_bytes));
  DS2_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(c.handle, rnn, CUDNN_FWD_MODE_TRAINING, c.x,
                                            &work_bytes, &reserve_bytes));
  auto floats = [](size_t bytes) { return static_cast<int64_t>(bytes / sizeof(float) + 1); };
  weights.reserve(floats(weight_bytes));
  work.reserve(floats(work_bytes));
  reserve.reserve(floats(reserve_bytes));
  kernels::fill(weights.data(), weights.capacity(), 0.0f, stream);
  DS2_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m));
  DS2_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b));
}

CudnnRnn::~CudnnRnn() {
  if (rnn) cudnnDestroyRNNDescriptor(rnn);
  if (m) cudnnDestroyTensorDescriptor(m);
  if (b) cudnnDestroyTensorDescriptor(b);
}

void CudnnRnn::forward(CudnnShared& c, const void* x, void* y) {
  DS2_CUDNN_CHECK(cudnnRNNForward(c.handle, rnn, CUDNN_FWD_MODE_TRAINING, c.seq_lengths.data(), c.x,
                                  x, c.y, y, c.h, nullptr, nullptr, c.h, nullptr, nullptr,
                                  weight_bytes, weights.data(), work_bytes, work.data(),
                                  reserve_bytes, reserve.data()));
}

void CudnnRnn::backward_data(CudnnShared& c, const void* y, const void* dy, void* dx) {
  DS2_CUDNN_CHECK(cudnnRNNBackwardData_v8(c.handle, rnn, c.seq_lengths.data(), c.y, y, dy, c.x, dx,
                                          c.h, nullptr, nullptr, nullptr, c.h, nullptr, nullptr,
                                          nullptr, weight_bytes, weights.data(), work_bytes,
                                          work.data(), reserve_bytes, reserve.data()));
}

}  // namespace ds2

#endif  // DS2_HAVE_CUDNN
