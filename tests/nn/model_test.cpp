#include "nn/model.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"
#include "gradient_check.h"

namespace ds2 {
namespace {

using nn_testing::random_sequences;

ModelConfig small_config() {
  ModelConfig c;
  c.conv = {{3, 5, 5, 2, 2}, {2, 3, 3, 1, 2}};
  c.rnn_layers = 2;
  c.rnn_hidden = 5;
  return c;
}

nn_testing::Differentiable wrap_model(Model& model) {
  nn_testing::Differentiable f;
  f.forward = [&model](const Sequences& in) -> const Sequences& {
    model.forward(in, /*training=*/true);
    return model.logits();
  };
  f.backward = [&model](const Sequences& grad) -> const Sequences* {
    model.backward(grad);
    return nullptr;  // the first layer skips its input gradient
  };
  return f;
}

TEST(Model, GradientMatchesFiniteDifferences) {
  ModelConfig gru = small_config();
  gru.conv.clear();
  gru.rnn_type = "gru";
  gru.bidirectional = false;
  gru.rnn_batch_norm = false;
  ModelConfig per_utterance = small_config();
  per_utterance.batch_norm_statistics = "utterance";
  for (const ModelConfig& config : {small_config(), gru, per_utterance}) {
    Rng rng(40);
    Model model(config, /*input_features=*/12, /*num_classes=*/4);
    model.initialize(rng);
    Sequences x = random_sequences({11, 3, 12}, {11, 6, 9}, rng, -1.0f, 1.0f, 2.0f);
    nn_testing::GradCheckOptions opt;
    // Conv -> batch norm -> ReLU moves every unit with every conv weight, so steps cross kinks
    // often; and the float loss of a whole model carries more round-off than a layer's.
    opt.allow_kinks = true;
    opt.atol = 1e-3;
    nn_testing::GradCheckReport r =
        nn_testing::check_gradients(wrap_model(model), model.parameters(), x, rng, opt);
    EXPECT_TRUE(r.ok(0.1)) << config.rnn_type << " " << config.batch_norm_statistics << ": "
                           << r.describe();
    EXPECT_EQ(r.checked, model.parameters().num_parameters());
  }
}

TEST(Model, OutputLengthMatchesForwardAndEveryLogitIsWritten) {
  Rng rng(41);
  Model model(small_config(), 12, 4);
  model.initialize(rng);
  Sequences x = random_sequences({37, 3, 12}, {37, 20, 9}, rng);
  model.forward(x, true);
  // Poison the logits, then show a second forward writes every element.
  const_cast<Sequences&>(model.logits()).data.fill(std::numeric_limits<float>::quiet_NaN());
  model.forward(x, false);
  const Sequences& y = model.logits();
  EXPECT_EQ(model.output_length(37), (37 + 4 - 5) / 2 + 1);
  ASSERT_EQ(y.data.shape(), (Shape{model.output_length(37), 3, 4}));
  for (int b = 0; b < 3; ++b) EXPECT_EQ(y.lengths[b], model.output_length(x.lengths[b]));
  EXPECT_EQ(nn_testing::non_finite(y.data), 0);
  EXPECT_EQ(nn_testing::nonzero_padding(y), 0);
}

// Utterance 1 of a padded batch of 3 (9 of 20 frames) gives the same logits alone as in the batch,
// with the model in training or inference mode.
void expect_alone_equals_in_batch(Model& model, Rng& rng, bool training) {
  Sequences batch = random_sequences({20, 3, 12}, {20, 9, 14}, rng, -1.0f, 1.0f, 3.0f);
  // A training step first, so running statistics (where the model has them) are not 0 / 1.
  model.forward(batch, true);
  Sequences alone;
  alone.data.resize({9, 1, 12});
  alone.lengths = {9};
  for (int t = 0; t < 9; ++t)
    for (int f = 0; f < 12; ++f) alone.data[t * 12 + f] = batch.data[(t * 3 + 1) * 12 + f];
  model.forward(batch, training);
  const Sequences in_batch = model.logits();
  model.forward(alone, training);
  const Sequences& y = model.logits();
  ASSERT_EQ(y.lengths[0], in_batch.lengths[1]);
  for (int t = 0; t < y.lengths[0]; ++t)
    for (int k = 0; k < 4; ++k)
      EXPECT_NEAR(y.data[t * 4 + k], in_batch.data[(t * 3 + 1) * 4 + k], 1e-5) << t << " " << k;
}

TEST(Model, UtteranceAloneEqualsUtteranceInBatch) {
  Rng rng(42);
  Model model(small_config(), 12, 4);
  model.initialize(rng);
  expect_alone_equals_in_batch(model, rng, /*training=*/false);
}

// With per-utterance statistics this holds in training mode too, and every batch norm says so.
TEST(Model, PerUtteranceStatisticsMakeAnUtteranceIndependentOfItsBatchInTraining) {
  ModelConfig config = small_config();
  config.batch_norm_statistics = "utterance";
  Rng rng(44);
  Model model(config, 12, 4);
  model.initialize(rng);
  EXPECT_TRUE(model.parameters().buffer_entries().empty()) << "no running statistics";
  EXPECT_NE(model.summary().find("+BN(per utterance)"), std::string::npos) << model.summary();
  EXPECT_NE(model.summary().find("BatchNorm 3 (per utterance)"), std::string::npos);
  expect_alone_equals_in_batch(model, rng, /*training=*/true);
  expect_alone_equals_in_batch(model, rng, /*training=*/false);
  ModelConfig bad = small_config();
  bad.batch_norm_statistics = "speaker";
  EXPECT_THROW(Model(bad, 12, 4), Error);
}

TEST(Model, DefaultArchitectureNamesShapesAndSummary) {
  Model model(ModelConfig{}, 81, 29);
  std::set<std::string> names;
  for (const ParamEntry& e : model.parameters().parameters()) names.insert(e.name);
  for (const char* n : {"conv0.weight", "conv0.bn.gamma", "conv1.bn.beta", "rnn0.fwd.W",
                        "rnn0.bwd.W", "rnn2.bwd.U", "rnn1.bn.gamma", "fc.weight", "fc.bias"})
    EXPECT_EQ(names.count(n), 1u) << n;
  EXPECT_EQ(names.count("conv0.bias"), 0u);  // the batch norm's beta plays that role
  EXPECT_EQ(model.parameters().buffer_entries().size(), 2u * (2 + 3));
  // 81 -> 41 -> 21 frequencies; 32 channels feed the first RNN.
  for (const ParamEntry& e : model.parameters().parameters())
    if (e.name == "rnn0.fwd.W") EXPECT_EQ(e.shape, (Shape{256, 32 * 21}));
  EXPECT_EQ(model.output_length(200), 100);

  const std::string summary = model.summary();
  for (const char* n : {"conv0 ", "conv1.relu", "rnn2 ", "fc ", "[32, 21]"})
    EXPECT_NE(summary.find(n), std::string::npos) << n << " in\n" << summary;
  EXPECT_NE(summary.find("total parameters " + std::to_string(model.parameters().num_parameters())),
            std::string::npos);
}

TEST(Model, StepsReuseBuffersAndRejectBadInput) {
  Rng rng(43);
  Model model(small_config(), 12, 4);
  model.initialize(rng);
  Sequences big = random_sequences({30, 4, 12}, {30, 25, 12, 7}, rng);
  Sequences small = random_sequences({15, 2, 12}, {15, 10}, rng);
  model.forward(big, true);
  Sequences grad = random_sequences(model.logits().data.shape(), model.logits().lengths, rng);
  model.backward(grad);
  const float* logits = model.logits().data.data();
  model.forward(small, true);
  EXPECT_EQ(model.logits().data.data(), logits);
  EXPECT_EQ(model.logits().data.dim(1), 2);

  Sequences wrong = random_sequences({5, 1, 13}, {5}, rng);
  EXPECT_THROW(model.forward(wrong, true), Error);
  ModelConfig bad = small_config();
  bad.rnn_type = "lstm";
  EXPECT_THROW(Model(bad, 12, 4), Error);
}

}  // namespace
}  // namespace ds2
