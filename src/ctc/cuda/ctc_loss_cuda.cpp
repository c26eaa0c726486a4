#include "ctc/cuda/ctc_loss_cuda.h"

#include <algorithm>
#include <string>

#include "core/cuda/check.h"
#include "kernels/ctc_loss.h"

namespace ds2 {
namespace {

// Grows a pinned host buffer to hold `count` elements (contents not kept). Callers only refill
// it after the stream has passed the copy that last read or wrote it.
template <typename T>
void grow_pinned(T** buffer, size_t* capacity, size_t count) {
  if (count <= *capacity) return;
  if (*buffer) DS2_CUDA_CHECK(cudaFreeHost(*buffer));
  *buffer = nullptr;
  *capacity = 0;
  void* p = nullptr;
  DS2_CUDA_CHECK(cudaMallocHost(&p, count * sizeof(T)));
  *buffer = static_cast<T*>(p);
  *capacity = count;
}

}  // namespace

CudaCtcLoss::~CudaCtcLoss() {
  // A copy from the staging buffers may still be queued if compute() threw midway.
  cudaStreamSynchronize(stream_);
  if (host_labels_) cudaFreeHost(host_labels_);
  if (host_losses_) cudaFreeHost(host_losses_);
}

void CudaCtcLoss::compute(const DeviceSequences& logits,
                          const std::vector<std::vector<int>>& labels, std::vector<double>* losses,
                          DeviceSequences* gradient) {
  const std::string where = "ctc_loss (CUDA)";
  DS2_CHECK(logits.data.rank() == 3,
            where << ": logits must be {T, B, K}, got " << shape_str(logits.data.shape()));
  check_sequences(logits, where);
  DS2_CHECK(losses != nullptr, where << ": losses is null");
  const int T = static_cast<int>(logits.data.dim(0));
  const int B = static_cast<int>(logits.data.dim(1));
  const int K = static_cast<int>(logits.data.dim(2));
  DS2_CHECK(K >= 1, where << ": alphabet_size must be >= 1 (blank), got " << K);
  DS2_CHECK(static_cast<int>(labels.size()) == B,
            where << ": " << labels.size() << " label sequences for a batch of " << B);

  size_t total = 0, longest = 0;
  for (int b = 0; b < B; ++b) {
    for (size_t i = 0; i < labels[b].size(); ++i) {
      const int c = labels[b][i];
      DS2_CHECK(c >= 1 && c < K, where << ": utterance " << b << " label " << i << " is " << c
                                       << ", expected 1.." << K - 1 << " (0 is the blank)");
    }
    total += labels[b].size();
    longest = std::max(longest, labels[b].size());
  }
  DS2_CHECK(total + B + 1 < (size_t{1} << 31), where << ": " << total << " labels in one batch");

  losses->resize(B);
  if (gradient) {
    gradient->data.resize(logits.data.shape());
    if (gradient != &logits) gradient->copy_lengths(logits, stream_);
  }
  if (B == 0) return;

  // Offsets and labels in one pinned buffer, one copy. The previous call waited for the stream,
  // so the buffer is free to refill.
  const size_t packed = static_cast<size_t>(B) + 1 + total;
  grow_pinned(&host_labels_, &host_labels_capacity_, packed);
  int* offsets = host_labels_;
  int* flat = host_labels_ + B + 1;
  offsets[0] = 0;
  for (int b = 0; b < B; ++b) {
    std::copy(labels[b].begin(), labels[b].end(), flat + offsets[b]);
    offsets[b + 1] = offsets[b] + static_cast<int>(labels[b].size());
  }
  labels_.reserve(static_cast<int64_t>(packed));
  DS2_CUDA_CHECK(cudaMemcpyAsync(labels_.data(), host_labels_, packed * sizeof(int),
                                 cudaMemcpyHostToDevice, stream_));

  const int max_label_length = static_cast<int>(longest);
  const size_t bytes = kernels::ctc_workspace_bytes(T, B, K, max_label_length);
  workspace_.reserve(static_cast<int64_t>(std::max<size_t>(bytes, 1)));
  losses_.reserve(B);
  kernels::ctc_loss(logits.data.data(), T, B, K, logits.device_lengths.data(),
                    labels_.data() + B + 1, labels_.data(), max_label_length, losses_.data(),
                    gradient ? gradient->data.data() : nullptr, workspace_.data(),
                    static_cast<size_t>(workspace_.capacity()), stream_);

  grow_pinned(&host_losses_, &host_losses_capacity_, static_cast<size_t>(B));
  DS2_CUDA_CHECK(cudaMemcpyAsync(host_losses_, losses_.data(), B * sizeof(double),
                                 cudaMemcpyDeviceToHost, stream_));
  DS2_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::copy(host_losses_, host_losses_ + B, losses->begin());
}

}  // namespace ds2
