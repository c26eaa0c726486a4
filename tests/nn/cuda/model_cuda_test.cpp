// CudaModel (nn/cuda/model_cuda.h) with deferred weight gradients: a conv + bidirectional model
// with batch norm, whose RNN layers queue their weight-gradient GEMMs on the context's
// weight-gradient stream. Checked, in fp32 and bf16: the gradients equal, bit for bit, those of a
// backward that does not defer (per-layer timing turns deferral off), and every layer's gradients
// are final when the event a listener records with record_gradients_final fires (a copy taken
// then, on another stream, equals the gradients after backward). In fp32 they also match the CPU
// model's (bf16 against the CPU through batch norm is rnn_stack_layer_test's and the parity
// tests' job). Fresh random inputs and weights, unequal lengths.
#include "nn/cuda/model_cuda.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/cuda/check.h"
#include "nn/backward_listener.h"
#include "nn/model.h"
#include "support/cuda_compare.h"

namespace ds2 {
namespace {

// At gradients_ready(k), copies layer k's gradients on a stream of its own, once the event the
// context records says they are final; the copy lands in `snapshot` (poisoned first).
class SnapshotListener : public BackwardListener {
 public:
  SnapshotListener(CudaContext& ctx, float* grads, const std::vector<int64_t>& counts)
      : ctx_(ctx), grads_(grads) {
    int64_t offset = 0;
    for (int64_t n : counts) {
      offsets_.push_back(offset);
      offset += n;
    }
    counts_ = counts;
    snapshot_.reserve(offset);
    poison(snapshot_.data(), offset, ctx);
    events_.resize(counts.size());
    for (auto& e : events_) DS2_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    DS2_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    ctx.synchronize();
  }
  ~SnapshotListener() override {
    for (auto e : events_) cudaEventDestroy(e);
    cudaStreamDestroy(copy_);
  }
  void gradients_ready(size_t layer) override {
    ctx_.record_gradients_final(events_[layer]);
    DS2_CUDA_CHECK(cudaStreamWaitEvent(copy_, events_[layer], 0));
    DS2_CUDA_CHECK(cudaMemcpyAsync(snapshot_.data() + offsets_[layer], grads_ + offsets_[layer],
                                   counts_[layer] * sizeof(float), cudaMemcpyDeviceToDevice,
                                   copy_));
  }
  std::vector<float> snapshot() {
    DS2_CUDA_CHECK(cudaStreamSynchronize(copy_));
    std::vector<float> host(static_cast<size_t>(snapshot_.capacity()));
    DS2_CUDA_CHECK(cudaMemcpy(host.data(), snapshot_.data(), host.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  CudaContext& ctx_;
  float* grads_;
  DeviceArray<float> snapshot_;
  std::vector<int64_t> offsets_, counts_;
  std::vector<cudaEvent_t> events_;
  cudaStream_t copy_ = nullptr;
};

ModelConfig bidirectional_config() {
  ModelConfig config;
  config.conv = {{4, 5, 7, 2, 2}};
  config.rnn_layers = 2;
  config.rnn_hidden = 96;
  config.bidirectional = true;
  config.rnn_batch_norm = true;
  return config;
}

void check_deferred_gradients(Precision precision) {
  SCOPED_TRACE(precision == Precision::kBf16 ? "bf16" : "fp32");
  const int F = 24, C = 11, T = 120, B = 3;
  Model host(bidirectional_config(), F, C);
  Rng rng(2024);
  host.initialize(rng);
  const std::vector<int> lengths = {120, 77, 9};
  Sequences x = random_sequences({T, B, F}, lengths, rng, -1.0f, 1.0f, 0.0f);
  host.forward(x, true);
  const int64_t To = host.logits().data.shape()[0];
  std::vector<int> out_lengths;
  for (int b = 0; b < B; ++b) out_lengths.push_back(host.logits().lengths[b]);
  Sequences dlogits = random_sequences({To, B, C}, out_lengths, rng, -1.0f, 1.0f, 0.0f);
  host.parameters().zero_grads();
  host.backward(dlogits);

  CudaContext ctx;
  ctx.set_matmul_precision(precision);
  CudaModel gpu(ctx, host);
  DeviceSequences xd, gd;
  upload(x, xd, ctx.stream());
  upload(dlogits, gd, ctx.stream());

  // Not deferred: per-layer timing keeps each layer's weight gradients on the main stream.
  gpu.set_timing(true);
  gpu.forward(xd, true);
  gpu.params().zero_grads();
  gpu.backward(gd);
  Tensor inline_grads;
  gpu.params().download_grads(inline_grads);
  gpu.set_timing(false);

  gpu.forward(xd, true);
  gpu.params().zero_grads();
  SnapshotListener listener(ctx, gpu.params().grads(), host.layer_parameter_counts());
  gpu.backward(gd, &listener);
  EXPECT_FALSE(ctx.defers_weight_gradients()) << "deferral outlives backward";
  Tensor grads;
  gpu.params().download_grads(grads);
  const std::vector<float> snapshot = listener.snapshot();

  ASSERT_EQ(grads.numel(), inline_grads.numel());
  EXPECT_EQ(0, std::memcmp(grads.data(), inline_grads.data(), grads.numel() * sizeof(float)))
      << "deferred weight gradients differ from inline ones";
  ASSERT_EQ(static_cast<int64_t>(snapshot.size()), grads.numel());
  int64_t early = 0;
  for (int64_t i = 0; i < grads.numel(); ++i)
    if (std::memcmp(&snapshot[i], grads.data() + i, sizeof(float)) != 0) ++early;
  EXPECT_EQ(early, 0) << "gradients copied when the listener's event fired differ from the final";
  if (precision != Precision::kFp32) return;
  const ParameterStore& store = host.parameters();
  for (const ParamEntry& e : store.parameters())
    EXPECT_LT(relative_error(store.grads().data() + e.offset, grads.data() + e.offset, e.numel),
              1e-4)
        << e.name;
}

TEST(CudaModel, DeferredWeightGradientsAreFinalWhenReportedAndMatchInlineAndCpu) {
  DS2_REQUIRE_GPU();
  check_deferred_gradients(Precision::kFp32);
  check_deferred_gradients(Precision::kBf16);
}

}  // namespace
}  // namespace ds2
