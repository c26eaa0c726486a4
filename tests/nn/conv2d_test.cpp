#include "nn/conv2d.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "gradient_check.h"

namespace ds2 {
namespace {

using nn_testing::random_sequences;

struct ConvSpec {
  int cin, cout, kt, kf, st, sf;
  bool bias;
};

// Direct convolution in double: zero outside [0, length) in time and [0, F) in frequency.
double reference_output(const Sequences& x, const ConvSpec& s, const float* w, const float* bias,
                        int t_out, int b, int c_out, int f_out) {
  const int B = static_cast<int>(x.batch()), F = static_cast<int>(x.data.dim(-1));
  double sum = s.bias ? bias[c_out] : 0.0;
  for (int c = 0; c < s.cin; ++c)
    for (int i = 0; i < s.kt; ++i)
      for (int j = 0; j < s.kf; ++j) {
        const int t = t_out * s.st - s.kt / 2 + i, f = f_out * s.sf - s.kf / 2 + j;
        if (t < 0 || t >= x.lengths[b] || f < 0 || f >= F) continue;
        sum += static_cast<double>(w[((c_out * s.cin + c) * s.kt + i) * s.kf + j]) *
               x.data[((int64_t{t} * B + b) * s.cin + c) * F + f];
      }
  return sum;
}

void expect_matches_reference(const ConvSpec& s, const Shape& in_shape,
                              const std::vector<int>& lengths, ConvAlgorithm algorithm,
                              int64_t column_budget = 0) {
  SCOPED_TRACE(algorithm == ConvAlgorithm::kTimeTaps ? "time taps" : "patches");
  Rng rng(20);
  ParameterStore store;
  Conv2d conv("conv", store, s.cin, s.cout, s.kt, s.kf, s.st, s.sf, s.bias);
  conv.set_algorithm(algorithm);
  if (column_budget > 0) conv.set_column_budget(column_budget);
  store.finalize();
  store.initialize(rng);
  Sequences x = random_sequences(in_shape, lengths, rng, -1.0f, 1.0f, 9.0f);
  const int T = static_cast<int>(in_shape[0]), B = static_cast<int>(in_shape[1]);
  const int F = static_cast<int>(in_shape.back());
  const int T_out = conv.output_length(T), F_out = conv.output_freq(F);
  Sequences y;
  nn_testing::poison(y, {T_out, B, s.cout, F_out});
  conv.forward(x, y, true);
  ASSERT_EQ(y.data.shape(), (Shape{T_out, B, s.cout, F_out}));
  EXPECT_EQ(nn_testing::nonzero_padding(y), 0);
  const float* w = store.values().data();
  const float* bias = s.bias ? w + int64_t{s.cout} * s.cin * s.kt * s.kf : nullptr;
  for (int b = 0; b < B; ++b) {
    EXPECT_EQ(y.lengths[b], (lengths[b] + 2 * (s.kt / 2) - s.kt) / s.st + 1);
    for (int t = 0; t < y.lengths[b]; ++t)
      for (int c = 0; c < s.cout; ++c)
        for (int f = 0; f < F_out; ++f)
          ASSERT_NEAR(y.data[((int64_t{t} * B + b) * s.cout + c) * F_out + f],
                      reference_output(x, s, w, bias, t, b, c, f), 1e-4)
              << "t " << t << " b " << b << " c " << c << " f " << f;
  }
}

TEST(Conv2d, OutputLengthFollowsPaddingAndStride) {
  ParameterStore store;
  Conv2d c1("c1", store, 1, 32, 11, 41, 2, 2);
  Conv2d c2("c2", store, 32, 32, 11, 21, 1, 2);
  EXPECT_EQ(c1.output_length(200), 100);
  EXPECT_EQ(c1.output_length(201), 101);
  EXPECT_EQ(c1.output_length(1), 1);
  EXPECT_EQ(c1.output_length(0), 0);
  EXPECT_EQ(c1.output_freq(81), 41);
  EXPECT_EQ(c2.output_length(100), 100);
  EXPECT_EQ(c2.output_freq(41), 21);
  EXPECT_EQ(c2.output_frame_shape({32, 41}), (Shape{32, 21}));
  EXPECT_EQ(c1.output_frame_shape({81}), (Shape{32, 41}));
  EXPECT_THROW(c2.output_frame_shape({16, 41}), Error);
  EXPECT_EQ(store.parameters()[0].name, "c1.weight");
  EXPECT_EQ(store.parameters()[0].shape, (Shape{32, 1, 11, 41}));
  EXPECT_EQ(store.parameters()[1].name, "c1.bias");
}

TEST(Conv2d, ForwardMatchesDirectConvolution) {
  for (ConvAlgorithm a : {ConvAlgorithm::kPatches, ConvAlgorithm::kTimeTaps}) {
    // One input channel given as {T, B, F}; strided, odd kernels.
    expect_matches_reference({1, 3, 5, 7, 2, 2, true}, {9, 3, 12}, {9, 4, 6}, a);
    // Several channels, even kernel, unit stride, no bias.
    expect_matches_reference({2, 3, 4, 2, 1, 1, false}, {6, 2, 2, 5}, {3, 6}, a);
    // Time stride 3 with a kernel shorter than some utterances' padding reach.
    expect_matches_reference({2, 4, 3, 3, 3, 1, true}, {10, 3, 2, 6}, {10, 1, 5}, a);
  }
  // Tiny workspace: every output frame is its own im2col chunk.
  expect_matches_reference({2, 4, 3, 3, 2, 1, true}, {7, 3, 2, 6}, {7, 1, 5},
                           ConvAlgorithm::kPatches, 1);
}

TEST(Conv2d, AutoPicksTimeTapsForDeepFrequencyPatches) {
  ParameterStore store;
  EXPECT_EQ(Conv2d("c0", store, 1, 32, 11, 41, 2, 2).algorithm(), ConvAlgorithm::kPatches);
  EXPECT_EQ(Conv2d("c1", store, 32, 32, 11, 21, 1, 2).algorithm(), ConvAlgorithm::kTimeTaps);
}

TEST(Conv2d, GradientMatchesFiniteDifferences) {
  for (ConvAlgorithm a : {ConvAlgorithm::kPatches, ConvAlgorithm::kTimeTaps})
    for (int stride_t : {1, 2})
      for (bool bias : {true, false}) {
        Rng rng(21);
        ParameterStore store;
        Conv2d conv("conv", store, 2, 3, 3, 3, stride_t, 2, bias);
        conv.set_algorithm(a);
        conv.set_column_budget(60);  // patches: several chunks
        store.finalize();
        store.initialize(rng);
        Sequences x = random_sequences({6, 3, 2, 5}, {6, 3, 4}, rng, -1.0f, 1.0f, 2.0f);
        nn_testing::GradCheckReport r =
            nn_testing::check_gradients(nn_testing::wrap_layer(conv, true), store, x, rng, {});
        EXPECT_TRUE(r.ok(0.0)) << (a == ConvAlgorithm::kPatches ? "patches" : "taps") << " stride "
                               << stride_t << " bias " << bias << ": " << r.describe();
      }
}

TEST(Conv2d, UtteranceAloneEqualsUtteranceInBatch) {
  for (ConvAlgorithm a : {ConvAlgorithm::kPatches, ConvAlgorithm::kTimeTaps}) {
    Rng rng(22);
    ParameterStore store;
    Conv2d conv("conv", store, 1, 4, 5, 3, 2, 2);
    conv.set_algorithm(a);
    store.finalize();
    store.initialize(rng);
    Sequences batch = random_sequences({10, 3, 7}, {10, 5, 7}, rng, -1.0f, 1.0f, 4.0f);
    Sequences alone;
    alone.data.resize({5, 1, 7});
    alone.lengths = {5};
    for (int t = 0; t < 5; ++t)
      for (int f = 0; f < 7; ++f) alone.data[t * 7 + f] = batch.data[(t * 3 + 1) * 7 + f];
    Sequences y_batch, y_alone;
    conv.forward(batch, y_batch, false);
    conv.forward(alone, y_alone, false);
    ASSERT_EQ(y_alone.lengths[0], y_batch.lengths[1]);
    const int frame = 4 * 4;
    for (int t = 0; t < y_alone.lengths[0]; ++t)
      for (int i = 0; i < frame; ++i)
        EXPECT_NEAR(y_alone.data[t * frame + i], y_batch.data[(t * 3 + 1) * frame + i], 1e-6);
  }
}

TEST(Conv2d, SkippingTheInputGradientKeepsParameterGradients) {
  for (ConvAlgorithm a : {ConvAlgorithm::kPatches, ConvAlgorithm::kTimeTaps}) {
    Rng rng(23);
    ParameterStore store;
    Conv2d conv("conv", store, 1, 2, 3, 3, 1, 1);
    conv.set_algorithm(a);
    store.finalize();
    store.initialize(rng);
    Sequences x = random_sequences({4, 2, 5}, {4, 3}, rng);
    Sequences y, dx;
    conv.forward(x, y, true);
    Sequences dy = random_sequences(y.data.shape(), y.lengths, rng);
    store.zero_grads();
    conv.backward(x, y, dy, dx);
    const Tensor with_input_grad = store.grads();
    EXPECT_EQ(dx.data.numel(), x.data.numel());

    Sequences untouched;
    conv.set_needs_input_grad(false);
    store.zero_grads();
    conv.backward(x, y, dy, untouched);
    EXPECT_EQ(untouched.data.numel(), 0);
    for (int64_t i = 0; i < store.grads().numel(); ++i)
      EXPECT_EQ(store.grads()[i], with_input_grad[i]);
  }
}

}  // namespace
}  // namespace ds2
