// Evaluation on the GPU gives the host model's logits (inference mode: running statistics).
#include "train/cuda/inference_cuda.h"

#include <gtest/gtest.h>

#include "support/cuda_compare.h"
#include "train/config.h"

namespace ds2 {
namespace {

TEST(CudaInference, LogitsMatchTheHostModel) {
  DS2_REQUIRE_GPU();
  Config cfg = parse_config(
      "features: {sample_rate: 8000, type: mel, n_mels: 20}\n"
      "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
      " rnn_hidden: 24, rnn_type: gru}\n");
  AcousticModel am = AcousticModel::create(cfg);
  // Non-trivial running statistics, so inference mode differs from training mode.
  Rng rng(3);
  Tensor& buffers = am.model->parameters().buffers();
  for (int64_t i = 0; i < buffers.numel(); ++i) buffers[i] = rng.uniform(0.5f, 1.5f);
  Sequences features = random_sequences({41, 3, 20}, {41, 17, 1}, rng);
  am.model->forward(features, /*training=*/false);
  const Sequences expected = am.model->logits();

  std::unique_ptr<InferenceEngine> gpu = make_inference_engine(am, "cuda");
  ASSERT_NE(gpu, nullptr);
  am.inference = gpu.get();
  const Sequences& got = am.forward_inference(features);
  EXPECT_EQ(got.lengths, expected.lengths);
  expect_close(expected.data, got.data, 1e-4, 1e-4, "logits");
  EXPECT_EQ(make_inference_engine(am, "cpu"), nullptr);
}

}  // namespace
}  // namespace ds2
