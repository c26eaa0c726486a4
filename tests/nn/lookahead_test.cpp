// Lookahead (nn/lookahead.h): known values (future frames past an utterance's end count as zero,
// padding frames are zero), central-difference gradients of the input and the weights with
// unequal lengths (an empty utterance, a full one, one shorter than the context), and the
// model wiring (model.lookahead adds it before the output layer).
#include "nn/lookahead.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "gradient_check.h"
#include "nn/model.h"

namespace ds2 {
namespace {

using nn_testing::random_sequences;

TEST(Lookahead, KnownValuesStopAtTheUtterancesEnd) {
  ParameterStore store;
  Lookahead row("lookahead", store, /*features=*/2, /*context=*/1);
  store.finalize();
  EXPECT_EQ(store.parameters()[0].name, "lookahead.weight");
  const float w[] = {1, 2, 10, 20};  // W[0] = {1, 2}, W[1] = {10, 20}
  std::copy(w, w + 4, store.values().data());
  Sequences x;
  x.data.resize({3, 2, 2});
  // Utterance 0 has 3 frames, utterance 1 has 2 (its frame 2 is padding holding 9s).
  const float xv[] = {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 9, 9};
  std::copy(xv, xv + 12, x.data.data());
  x.lengths = {3, 2};
  Sequences y;
  nn_testing::poison(y, {3, 2, 2});
  row.forward(x, y, true);
  // b0: t0 = 1 + 10*3, 2 + 20*3; t1 = 3 + 10*5, 6 + 20*5; t2 = 5 (no frame after), 10.
  // b1: t0 = 2 + 10*4, 4 + 20*4; t1 = 4 (frame 2 is padding), 8; t2 padding = 0.
  const float expected[] = {31, 62, 42, 84, 53, 106, 4, 8, 5, 10, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(y.data[i], expected[i]) << i;
}

TEST(Lookahead, GradientMatchesFiniteDifferences) {
  Rng rng(11);
  for (const int context : {1, 3, 9}) {
    SCOPED_TRACE("context " + std::to_string(context));
    ParameterStore store;
    Lookahead row("lookahead", store, 5, context);
    store.finalize();
    store.initialize(rng);
    Sequences x = random_sequences({7, 4, 5}, {7, 0, 2, 5}, rng, -1.0f, 1.0f, 2.5f);
    const nn_testing::GradCheckReport r =
        nn_testing::check_gradients(nn_testing::wrap_layer(row, true), store, x, rng, {});
    EXPECT_TRUE(r.ok(0.0)) << r.describe();
  }
}

TEST(Lookahead, RefusesBadSizesAndSitsBeforeTheOutputLayer) {
  ParameterStore store;
  EXPECT_THROW(Lookahead("l", store, 0, 2), Error);
  EXPECT_THROW(Lookahead("l", store, 4, 0), Error);
  ModelConfig config;
  config.conv = {};
  config.rnn_layers = 2;
  config.rnn_hidden = 16;
  config.bidirectional = false;
  config.lookahead = 4;
  Model model(config, 8, 5);
  const auto& layers = model.layers();
  ASSERT_GE(layers.size(), 2u);
  EXPECT_EQ(layers[layers.size() - 2]->name(), "lookahead");
  EXPECT_EQ(layers.back()->name(), "fc");
  EXPECT_NE(model.summary().find("Lookahead 16 features, 4 future frames"), std::string::npos)
      << model.summary();
}

}  // namespace
}  // namespace ds2
