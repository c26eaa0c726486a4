#include "nn/rnn_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/cpu_threads.h"
#include "core/error.h"
#include "gradient_check.h"

namespace ds2 {
namespace {

using nn_testing::random_sequences;

struct RnnSpec {
  RnnType type;
  bool bidirectional;
  bool batch_norm;
};

std::string spec_name(const RnnSpec& s) {
  return rnn_type_name(s.type) + (s.bidirectional ? " bi" : " uni") + (s.batch_norm ? " bn" : "");
}

constexpr float kClip = 2.0f;

std::unique_ptr<RnnLayer> make_rnn(const RnnSpec& s, ParameterStore& store, int in, int hidden) {
  return std::make_unique<RnnLayer>("rnn", store, in, hidden, s.type, s.bidirectional, s.batch_norm,
                                    kClip, /*bn_momentum=*/0.1f);
}

// Looks a tensor up by name, so the reference also pins the parameter names.
const float* find(const ParameterStore& store, const std::string& name) {
  for (const ParamEntry& e : store.parameters())
    if (e.name == name) return store.values().data() + e.offset;
  for (const ParamEntry& e : store.buffer_entries())
    if (e.name == name) return store.buffers().data() + e.offset;
  ADD_FAILURE() << "no parameter " << name;
  return nullptr;
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// One utterance through the layer's equations in double, batch norm from running statistics.
// Returns {length, H}, the directions summed.
std::vector<double> reference(const RnnSpec& s, const ParameterStore& store, const Sequences& x,
                              int b, int hidden) {
  const int B = static_cast<int>(x.batch()), in = static_cast<int>(x.frame_size());
  const int L = x.lengths[b], H = hidden, G = s.type == RnnType::kGru ? 3 : 1;
  const int D = s.bidirectional ? 2 : 1, P = D * G * H;
  std::vector<double> out(static_cast<size_t>(L) * H, 0.0);
  for (int d = 0; d < D; ++d) {
    const std::string dir = std::string("rnn.") + (d ? "bwd" : "fwd");
    const float* W = find(store, dir + ".W");
    const float* U = find(store, dir + ".U");
    std::vector<double> h(H, 0.0);
    for (int step = 0; step < L; ++step) {
      const int t = d ? L - 1 - step : step;
      const float* xt = x.data.data() + (int64_t{t} * B + b) * in;
      std::vector<double> a(G * H), g(G * H);
      for (int k = 0; k < G * H; ++k) {
        for (int i = 0; i < in; ++i) a[k] += static_cast<double>(W[k * in + i]) * xt[i];
        if (s.batch_norm) {
          const int f = d * G * H + k;  // feature of the shared normalizer
          a[k] = find(store, "rnn.bn.gamma")[f] * (a[k] - find(store, "rnn.bn.running_mean")[f]) /
                     std::sqrt(find(store, "rnn.bn.running_var")[f] + 1e-5) +
                 find(store, "rnn.bn.beta")[f];
        } else {
          a[k] += find(store, dir + (G == 3 ? ".b_x" : ".b"))[k];
        }
        for (int j = 0; j < H; ++j) g[k] += static_cast<double>(U[k * H + j]) * h[j];
        if (G == 3) g[k] += find(store, dir + ".b_h")[k];
      }
      (void)P;
      std::vector<double> h_new(H);
      for (int k = 0; k < H; ++k) {
        if (G == 1) {
          h_new[k] = std::min(std::max(a[k] + g[k], 0.0), static_cast<double>(kClip));
        } else {
          const double r = sigmoid(a[k] + g[k]), z = sigmoid(a[H + k] + g[H + k]);
          const double n = std::tanh(a[2 * H + k] + r * g[2 * H + k]);
          h_new[k] = (1 - z) * n + z * h[k];
        }
        out[static_cast<size_t>(t) * H + k] += h_new[k];
      }
      h = h_new;
    }
  }
  return out;
}

void randomize_running_stats(ParameterStore& store, Rng& rng) {
  for (const ParamEntry& e : store.buffer_entries())
    for (int64_t i = 0; i < e.numel; ++i)
      store.buffers()[e.offset + i] = e.name.find("var") != std::string::npos
                                          ? rng.uniform(0.5f, 2.0f)
                                          : rng.uniform(-0.5f, 0.5f);
}

const RnnSpec kAllSpecs[] = {
    {RnnType::kRelu, false, false}, {RnnType::kRelu, true, false}, {RnnType::kRelu, false, true},
    {RnnType::kRelu, true, true},   {RnnType::kGru, false, false}, {RnnType::kGru, true, false},
    {RnnType::kGru, false, true},   {RnnType::kGru, true, true},
};

TEST(RnnLayer, ForwardMatchesPerUtteranceReference) {
  for (const RnnSpec& s : kAllSpecs) {
    Rng rng(30);
    const int in = 4, H = 5;
    ParameterStore store;
    auto rnn = make_rnn(s, store, in, H);
    store.finalize();
    store.initialize(rng);
    randomize_running_stats(store, rng);
    // Scaled so the relu layer visits both its zero floor and its clip.
    Sequences x = random_sequences({6, 3, in}, {6, 2, 4}, rng, -2.0f, 2.0f, 7.0f);
    Sequences y;
    nn_testing::poison(y, {6, 3, H});
    rnn->forward(x, y, /*training=*/false);
    ASSERT_EQ(y.data.shape(), (Shape{6, 3, H})) << spec_name(s);
    EXPECT_EQ(y.lengths, x.lengths);
    EXPECT_EQ(nn_testing::nonzero_padding(y), 0) << spec_name(s);
    EXPECT_EQ(nn_testing::non_finite(y.data), 0) << spec_name(s);
    for (int b = 0; b < 3; ++b) {
      const std::vector<double> expected = reference(s, store, x, b, H);
      for (int t = 0; t < x.lengths[b]; ++t)
        for (int k = 0; k < H; ++k)
          EXPECT_NEAR(y.data[(t * 3 + b) * H + k], expected[t * H + k], 2e-5)
              << spec_name(s) << " b " << b << " t " << t << " k " << k;
    }
  }
}

TEST(RnnLayer, GradientMatchesFiniteDifferences) {
  for (const RnnSpec& s : kAllSpecs) {
    Rng rng(31);
    const int in = 3, H = 4;
    ParameterStore store;
    auto rnn = make_rnn(s, store, in, H);
    store.finalize();
    store.initialize(rng);
    Sequences x = random_sequences({5, 3, in}, {5, 2, 4}, rng, -1.5f, 1.5f, 3.0f);
    nn_testing::GradCheckOptions opt;
    opt.allow_kinks = s.type == RnnType::kRelu;
    nn_testing::GradCheckReport r =
        nn_testing::check_gradients(nn_testing::wrap_layer(*rnn, true), store, x, rng, opt);
    EXPECT_TRUE(r.ok(opt.allow_kinks ? 0.1 : 0.0)) << spec_name(s) << ": " << r.describe();
  }
}

TEST(RnnLayer, ResidualAddsTheInputAndItsGradient) {
  for (const RnnSpec& s : kAllSpecs) {
    Rng rng(33);
    const int H = 4;
    ParameterStore plain_store, residual_store;
    RnnLayer plain("rnn", plain_store, H, H, s.type, s.bidirectional, s.batch_norm, kClip, 0.1f);
    RnnLayer residual("rnn", residual_store, H, H, s.type, s.bidirectional, s.batch_norm, kClip,
                      0.1f, /*residual=*/true);
    plain_store.finalize();
    residual_store.finalize();
    plain_store.initialize(rng);
    residual_store.values() = plain_store.values();
    residual_store.buffers() = plain_store.buffers();
    Sequences x = random_sequences({5, 3, H}, {5, 2, 4}, rng, -1.5f, 1.5f, /*padding=*/3.0f);
    Sequences y_plain, y_residual;
    plain.forward(x, y_plain, /*training=*/false);
    residual.forward(x, y_residual, /*training=*/false);
    EXPECT_EQ(nn_testing::nonzero_padding(y_residual), 0) << spec_name(s);
    for (int t = 0; t < 5; ++t)
      for (int b = 0; b < 3; ++b)
        for (int k = 0; t < x.lengths[b] && k < H; ++k) {
          const int64_t i = (t * 3 + b) * H + k;
          EXPECT_FLOAT_EQ(y_residual.data[i], y_plain.data[i] + x.data[i]) << spec_name(s);
        }
    nn_testing::GradCheckOptions opt;
    opt.allow_kinks = s.type == RnnType::kRelu;
    nn_testing::GradCheckReport r = nn_testing::check_gradients(
        nn_testing::wrap_layer(residual, true), residual_store, x, rng, opt);
    EXPECT_TRUE(r.ok(opt.allow_kinks ? 0.1 : 0.0)) << spec_name(s) << ": " << r.describe();
  }
  ParameterStore store;
  EXPECT_THROW(RnnLayer("rnn", store, 3, 4, RnnType::kRelu, true, false, kClip, 0.1f, true), Error);
}

TEST(RnnLayer, UtteranceAloneEqualsUtteranceInBatch) {
  Rng rng(32);
  const int in = 6, H = 8;
  ParameterStore store;
  RnnLayer rnn("rnn", store, in, H, RnnType::kRelu, /*bidirectional=*/true,
               /*batch_norm=*/true, 20.0f, 0.1f);
  store.finalize();
  store.initialize(rng);
  randomize_running_stats(store, rng);
  // The utterance of interest is the shortest, in the middle of the batch.
  Sequences batch = random_sequences({9, 3, in}, {9, 4, 7}, rng, -1.0f, 1.0f, 5.0f);
  Sequences alone;
  alone.data.resize({4, 1, in});
  alone.lengths = {4};
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < in; ++i) alone.data[t * in + i] = batch.data[(t * 3 + 1) * in + i];
  Sequences y_batch, y_alone;
  rnn.forward(batch, y_batch, false);
  rnn.forward(alone, y_alone, false);
  for (int t = 0; t < 4; ++t)
    for (int k = 0; k < H; ++k)
      EXPECT_NEAR(y_alone.data[t * H + k], y_batch.data[(t * 3 + 1) * H + k], 1e-5);
}

// The recurrence runs as (direction, batch slice) parts on the compute threads: every thread count
// must give what one thread gives, outputs and all gradients (unsorted lengths, an empty
// utterance, odd sizes; 5 threads cut a direction's 7 rows into 2 or 5 slices), up to the
// rounding of another summation order. OpenBLAS picks its kernels by shape (core/blas.cpp: on
// AVX-512 a product of 334 rows and one of 1001 round differently), and the slices' products have
// other shapes at other thread counts: 7.6e-6 relative in a BN layer's dW at 5 threads on an
// AVX-512 machine, 1e-6 held elsewhere.
TEST(RnnLayer, AnyThreadCountGivesTheOneThreadResult) {
  struct DefaultThreadsAfter {
    ~DefaultThreadsAfter() { set_cpu_threads(0); }
  } restore;
  for (const RnnSpec& s : kAllSpecs) {
    const int in = 6, H = 37, T = 9, B = 7;
    const std::vector<int> lengths{9, 3, 9, 0, 5, 8, 1};
    std::vector<std::vector<float>> first;  // y, dx, parameter gradients at 1 thread
    for (int threads : {1, 2, 3, 5}) {
      set_cpu_threads(threads);
      Rng rng(34);
      ParameterStore store;
      auto rnn = make_rnn(s, store, in, H);
      store.finalize();
      store.initialize(rng);
      const Sequences x = random_sequences({T, B, in}, lengths, rng, -2.0f, 2.0f, 7.0f);
      const Sequences dy = random_sequences({T, B, H}, lengths, rng);
      Sequences y, dx;
      rnn->forward(x, y, /*training=*/true);
      store.grads().fill(0.0f);
      rnn->backward(x, y, dy, dx);
      const std::vector<std::vector<float>> got{
          {y.data.data(), y.data.data() + y.data.numel()},
          {dx.data.data(), dx.data.data() + dx.data.numel()},
          {store.grads().data(), store.grads().data() + store.grads().numel()}};
      if (threads == 1) {
        first = got;
        continue;
      }
      const char* what[] = {"output", "input gradient", "parameter gradients"};
      for (int k = 0; k < 3; ++k)
        for (size_t i = 0; i < got[k].size(); ++i)
          ASSERT_NEAR(got[k][i], first[k][i], 2e-5 * (1.0 + std::fabs(first[k][i])))
              << spec_name(s) << ", " << threads << " threads, " << what[k] << " " << i;
    }
  }
}

TEST(RnnLayer, ParameterNamesAndLayout) {
  ParameterStore store;
  RnnLayer gru("rnn1", store, 7, 4, RnnType::kGru, true, false, 20.0f, 0.1f);
  std::vector<std::string> names;
  for (const ParamEntry& e : store.parameters()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rnn1.fwd.W", "rnn1.bwd.W", "rnn1.fwd.U",
                                             "rnn1.fwd.b_x", "rnn1.fwd.b_h", "rnn1.bwd.U",
                                             "rnn1.bwd.b_x", "rnn1.bwd.b_h"}));
  EXPECT_EQ(store.parameters()[0].shape, (Shape{12, 7}));
  EXPECT_EQ(store.parameters()[2].shape, (Shape{12, 4}));

  ParameterStore store2;
  RnnLayer rnn("rnn0", store2, 7, 4, RnnType::kRelu, false, true, 20.0f, 0.1f);
  names.clear();
  for (const ParamEntry& e : store2.parameters()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rnn0.fwd.W", "rnn0.fwd.U", "rnn0.bn.gamma",
                                             "rnn0.bn.beta"}));
  EXPECT_EQ(parse_rnn_type("gru"), RnnType::kGru);
  EXPECT_EQ(parse_rnn_type("rnn"), RnnType::kRelu);
  EXPECT_THROW(parse_rnn_type("lstm"), Error);
}

}  // namespace
}  // namespace ds2
