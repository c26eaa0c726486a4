// CPU RnnLayer vs CudaRnnLayer (the GEMM RNN): clipped ReLU and GRU, uni- and bidirectional, with
// and without batch norm; forward (training and inference), running statistics, backward (dx
// and every parameter gradient, accumulated onto non-zero gradients). Shapes: hidden 37 (odd),
// odd T, batch 1, unequal lengths with an empty and a full-length utterance, T = 1, 4-D input.
// Padding of the inputs is set to finite non-zero values, so any leak of padding shows.
// Tolerances (fp32 GEMM summation order only): forward atol 2e-5 rtol 1e-4; dx and parameter
// gradients atol 1e-4 rtol 1e-3 (through up to 21 recurrent steps); running statistics
// 1e-6 / 1e-5. In bf16 (rounded projection, recurrence and weight-gradient operands) whole
// tensors are compared by relative error (kBf16ForwardError, kBf16GradientError, or
// kBf16BatchNormGradientError behind batch norm), on gradients that start from zero so that the
// error is the layer's own.
#include "nn/cuda/rnn_layer_cuda.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/cuda/device_array.h"
#include "nn/cuda/gemm_recurrence.h"
#include "support/cuda_compare.h"
#include "support/cuda_rnn_layer_pair.h"

namespace ds2 {
namespace {

struct RnnSpec {
  RnnType type;
  bool bidirectional;
  bool batch_norm;
  bool residual = false;
};

std::string spec_name(const RnnSpec& s) {
  return rnn_type_name(s.type) + (s.bidirectional ? "_bi" : "_uni") + (s.batch_norm ? "_bn" : "") +
         (s.residual ? "_residual" : "");
}

struct Batch {
  Shape input_shape;  // {T, B, in} or {T, B, C, F}
  std::vector<int> lengths;
};

constexpr int kHidden = 37;
constexpr float kClip = 1.0f;  // low enough that the clipped ReLU visits its clip

std::unique_ptr<RnnLayer> make_cpu(const RnnSpec& s, ParameterStore& store, int in,
                                   int hidden = kHidden) {
  return std::make_unique<RnnLayer>("rnn", store, in, hidden, s.type, s.bidirectional, s.batch_norm,
                                    kClip, /*bn_momentum=*/0.1f, s.residual);
}

enum class Mode { kTraining, kInference, kTrainingNoInputGrad };

const char* mode_name(Mode m) {
  return m == Mode::kTraining ? "training" : m == Mode::kInference ? "inference" : "no-input-grad";
}

void check_case(CudaContext& ctx, const RnnSpec& spec, const Batch& batch, Mode mode, uint64_t seed,
                Precision precision = Precision::kFp32, bool persistent = true,
                int hidden = kHidden) {
  SCOPED_TRACE(spec_name(spec) + " " + shape_str(batch.input_shape) + " " + mode_name(mode) +
               (precision == Precision::kBf16 ? " bf16" : "") +
               (persistent ? "" : " GEMM recurrence"));
  const bool bf16 = precision == Precision::kBf16;
  const double bf16_gradient_bound =
      spec.batch_norm ? kBf16BatchNormGradientError : kBf16GradientError;
  ctx.set_matmul_precision(precision);
  auto compare = [&](const float* ref, const float* got, int64_t n, double atol, double rtol,
                     double bf16_bound, const std::string& what) {
    if (bf16) {
      EXPECT_LT(relative_error(ref, got, n), bf16_bound) << what;
    } else {
      expect_close(ref, got, n, atol, rtol, what);
    }
  };
  Rng rng(seed);
  const Shape& shape = batch.input_shape;
  const int T = static_cast<int>(shape[0]), B = static_cast<int>(shape[1]);
  const int in = static_cast<int>(shape_numel(shape) / (int64_t{T} * B));
  ParameterStore store;
  auto cpu = make_cpu(spec, store, in, hidden);
  store.finalize();
  store.initialize(rng);
  if (const BatchNorm* bn = cpu->bn()) {
    for (int i = 0; i < bn->channels(); ++i) {
      store.value(bn->gamma())[i] = rng.uniform(0.5f, 1.5f);
      store.value(bn->beta())[i] = rng.uniform(-0.5f, 0.5f);
      store.value(bn->running_mean())[i] = rng.uniform(-0.3f, 0.3f);
      store.value(bn->running_var())[i] = rng.uniform(0.5f, 2.0f);
    }
  }
  if (bf16) {
    store.zero_grads();
  } else {
    fill_uniform(store.grads(), rng);  // gradients accumulate (+=) onto what is there
  }

  DeviceParameters params(ctx, store);
  upload(store.grads().data(), store.grads().numel(), params.grads(), ctx.stream());
  CudaRnnLayer gpu(ctx, params, *cpu);
  gpu.set_use_persistent(persistent);
  const bool training = mode != Mode::kInference;
  const bool input_grad = mode != Mode::kTrainingNoInputGrad;
  cpu->set_needs_input_grad(input_grad);
  gpu.set_needs_input_grad(input_grad);

  Sequences x = random_sequences(shape, batch.lengths, rng, -1.0f, 1.0f, /*padding_value=*/3.0f);
  Sequences dy =
      random_sequences({T, B, hidden}, batch.lengths, rng, -1.0f, 1.0f, /*padding_value=*/-4.0f);

  Sequences y_ref, dx_ref;
  cpu->forward(x, y_ref, training);
  DeviceSequences xd, yd, dyd, dxd;
  upload(x, xd, ctx.stream());
  upload(dy, dyd, ctx.stream());
  yd.data.resize({T, B, hidden});
  poison(yd.data, ctx);
  gpu.forward(xd, yd, training);
  // Every batch here fits a persistent plan, the GRU's in bf16 training too.
  EXPECT_EQ(gpu.ran_persistent(), persistent) << gpu.recurrence_path();
  const Tensor y = download_tensor(yd.data, ctx);
  compare(y_ref.data.data(), y.data(), y.numel(), 2e-5, 1e-4, kBf16ForwardError, "forward");
  EXPECT_EQ(nonzero_padding(y, batch.lengths), 0) << "output padding";
  EXPECT_EQ(yd.lengths, batch.lengths);

  if (spec.batch_norm) {
    ParameterStore mirror;
    auto mirror_layer = make_cpu(spec, mirror, in, hidden);
    mirror.finalize();
    params.download_to(mirror);
    ASSERT_EQ(store.buffers().shape(), mirror.buffers().shape());
    compare(store.buffers().data(), mirror.buffers().data(), store.buffers().numel(), 1e-6, 1e-5,
            kBf16ForwardError, "running statistics");
  }

  cpu->backward(x, y_ref, dy, dx_ref);
  dxd.data.resize(shape);
  poison(dxd.data, ctx);
  gpu.backward(xd, yd, dyd, dxd);
  if (input_grad) {
    const Tensor dx = download_tensor(dxd.data, ctx);
    compare(dx_ref.data.data(), dx.data(), dx.numel(), 1e-4, 1e-3, bf16_gradient_bound, "dx");
    EXPECT_EQ(nonzero_padding(dx, batch.lengths), 0) << "dx padding";
  }
  Tensor grads;
  params.download_grads(grads);
  for (const ParamEntry& e : store.parameters())
    compare(store.grads().data() + e.offset, grads.data() + e.offset, e.numel, 1e-4, 1e-3,
            bf16_gradient_bound, "grad " + e.name);
}

const Batch kBatches[] = {
    {{9, 4, 13}, {9, 0, 5, 3}},           // unsorted, empty and full-length utterances
    {{21, 1, 13}, {21}},                  // batch 1, ~20 recurrent steps
    {{17, 5, 3, 5}, {3, 17, 0, 11, 16}},  // 4-D input (15 features per frame)
    {{1, 2, 13}, {1, 0}},                 // a single timestep
};

class CudaRnnLayerTest : public ::testing::TestWithParam<RnnSpec> {};

TEST_P(CudaRnnLayerTest, MatchesCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  uint64_t seed = 200;
  for (const Batch& b : kBatches)
    for (Mode m : {Mode::kTraining, Mode::kInference}) check_case(ctx, GetParam(), b, m, ++seed);
  check_case(ctx, GetParam(), kBatches[0], Mode::kTrainingNoInputGrad, ++seed);
}

// The bf16 paths (bf16 projection and dW/dX GEMMs, dU on rounded states and gradients, the
// tensor-core recurrence, the GRU's fp32 persistent recurrence, and the GEMM recurrence on bf16
// operands) against the fp32 CPU layer.
TEST_P(CudaRnnLayerTest, Bf16MatchesCpuWithinRounding) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  uint64_t seed = 300;
  for (const Batch& b : kBatches) {
    ++seed;
    // A single valid frame: batch norm's variance is 0 and its output is beta whatever the input,
    // so dx and dW are zero in exact arithmetic and bf16 rounding, amplified by 1 / sqrt(eps), is
    // all there is to compare (GRU measured 1.0-2.3 relative). MatchesCpu covers it in fp32.
    if (GetParam().batch_norm && b.input_shape[0] == 1) continue;
    check_case(ctx, GetParam(), b, Mode::kTraining, seed, Precision::kBf16);
    // The bf16 GEMM recurrence too (U and each step's state and gradient rounded, as the
    // tensor-core recurrence rounds them).
    check_case(ctx, GetParam(), b, Mode::kTraining, seed, Precision::kBf16, false);
  }
}

// Lengths whose steps have `rows` valid rows each, in order ({16, 16, 12, 3, 1}: 16 rows valid at
// t 0-1, 12 at t 2, ...): active rows, as CudaRnnLayer counts them.
std::vector<int> lengths_for_rows(const std::vector<int>& rows) {
  std::vector<int> lengths(rows.front(), 0);
  for (int t = 0; t < static_cast<int>(rows.size()); ++t)
    for (int b = 0; b < rows[t]; ++b) lengths[b] = t + 1;
  return lengths;
}

// The bf16 clipped ReLU's GEMM recurrence where its step GEMMs run padded batch rows
// (gemm_recurrence_gemm_rows): at H 3077 the steps of 25-28 valid rows run 64, the last step's 20
// do not (at H 2560 steps of 17-24 run 25, at H 4608 forward steps of 57-63 run 64); both
// directions (direction 0's padding rows read direction 1's states), forward and backward, against
// the fp32 CPU layer.
TEST(CudaRnnLayer, Bf16GemmRecurrenceOnPaddedRowsMatchesCpu) {
  DS2_REQUIRE_GPU();
  constexpr int kH = 3077;
  ASSERT_EQ(gemm_recurrence_gemm_rows(28, 1, kH, true, false), 64);
  ASSERT_EQ(gemm_recurrence_gemm_rows(20, 1, kH, true, false), 20);
  std::vector<int> lengths;
  for (const auto& [count, length] : {std::pair{20, 4}, {5, 3}, {3, 1}, {2, 0}})
    lengths.insert(lengths.end(), count, length);
  const Batch batch{{4, static_cast<int64_t>(lengths.size()), 16}, lengths};
  CudaContext ctx;
  for (const bool bidirectional : {false, true})
    check_case(ctx, RnnSpec{RnnType::kRelu, bidirectional, false}, batch, Mode::kTraining,
               bidirectional ? 1201 : 1200, Precision::kBf16, /*persistent=*/false, kH);
  // H 2560: steps of 20 and 17 rows run 25, of 5 their own.
  ASSERT_EQ(gemm_recurrence_gemm_rows(17, 1, 2560, true, true), 25);
  const std::vector<int> lengths_2560 = lengths_for_rows({20, 20, 17, 5});
  check_case(ctx, RnnSpec{RnnType::kRelu, true, false}, Batch{{4, 20, 8}, lengths_2560},
             Mode::kTraining, 1202, Precision::kBf16, /*persistent=*/false, 2560);
  // H 4608: forward steps of 60 and 57 rows run 64 (4 rows past the batch), backward-data's not.
  ASSERT_EQ(gemm_recurrence_gemm_rows(57, 1, 4608, true, false), 64);
  ASSERT_EQ(gemm_recurrence_gemm_rows(60, 1, 4608, true, true), 60);
  const std::vector<int> lengths_4608 = lengths_for_rows({60, 60, 57, 3});
  check_case(ctx, RnnSpec{RnnType::kRelu, true, false}, Batch{{4, 60, 8}, lengths_4608},
             Mode::kTraining, 1203, Precision::kBf16, /*persistent=*/false, 4608);
}

// The bf16 clipped ReLU's GEMM recurrence where its forward steps run as one fused kernel each
// (gemm_recurrence_fuses_relu_forward: batch up to 8 past H 4096), at H 4100 (padded to 4104),
// batch 5 with unequal lengths, one and both directions, against the fp32 CPU layer.
TEST(CudaRnnLayer, Bf16FusedReluStepMatchesCpu) {
  DS2_REQUIRE_GPU();
  constexpr int kH = 4100;
  ASSERT_TRUE(gemm_recurrence_fuses_relu_forward(5, kH, true));
  const std::vector<int> lengths = {4, 4, 3, 1, 0};
  CudaContext ctx;
  for (const bool bidirectional : {false, true})
    check_case(ctx, RnnSpec{RnnType::kRelu, bidirectional, false}, Batch{{4, 5, 8}, lengths},
               Mode::kTraining, bidirectional ? 1341 : 1340, Precision::kBf16,
               /*persistent=*/false, kH);
}

// The fp32 GEMM recurrence where its step GEMMs run 17 or 4 rows (gemm_recurrence_gemm_rows):
// clipped ReLU at H 3840 (forward 16 and 12 rows as 17, 3 as 4; backward-data 16, 12 and 3 as 17,
// 1 as 1), reading the states, zero state and dpre past their ends, and the GRU at H 2560 (7-16
// rows as 17 both passes, 2-6 backward). Both directions (direction 0's padding rows read
// direction 1's states), forward and backward, against the CPU layer.
TEST(CudaRnnLayer, Fp32GemmRecurrenceOnPaddedRowsMatchesCpu) {
  DS2_REQUIRE_GPU();
  ASSERT_EQ(gemm_recurrence_gemm_rows(12, 1, 3840, false, false), 17);
  ASSERT_EQ(gemm_recurrence_gemm_rows(3, 1, 3840, false, false), 4);
  ASSERT_EQ(gemm_recurrence_gemm_rows(3, 1, 3840, false, true), 17);
  ASSERT_EQ(gemm_recurrence_gemm_rows(12, 3, 2560, false, false), 17);
  ASSERT_EQ(gemm_recurrence_gemm_rows(3, 3, 2560, false, true), 17);
  const std::vector<int> relu_lengths = lengths_for_rows({16, 16, 12, 3, 1});
  const std::vector<int> gru_lengths = lengths_for_rows({12, 12, 7, 3});
  CudaContext ctx;
  for (const bool bidirectional : {false, true}) {
    check_case(ctx, RnnSpec{RnnType::kRelu, bidirectional, false}, Batch{{5, 16, 8}, relu_lengths},
               Mode::kTraining, bidirectional ? 1301 : 1300, Precision::kFp32, /*persistent=*/false,
               3840);
    check_case(ctx, RnnSpec{RnnType::kGru, bidirectional, false}, Batch{{4, 12, 8}, gru_lengths},
               Mode::kTraining, bidirectional ? 1311 : 1310, Precision::kFp32,
               /*persistent=*/false, 2560);
  }
}

// The bf16 GRU's GEMM recurrence, whose forward GEMMs run their rows rounded up to 8 at H 1296
// (13 as 16, 5 and 1 as 8), against the CPU layer.
TEST(CudaRnnLayer, Bf16GruGemmRecurrenceOnPaddedRowsMatchesCpu) {
  DS2_REQUIRE_GPU();
  ASSERT_EQ(gemm_recurrence_gemm_rows(13, 3, 1296, true, false), 16);
  ASSERT_EQ(gemm_recurrence_gemm_rows(1, 3, 1296, true, false), 8);
  const std::vector<int> lengths = lengths_for_rows({13, 13, 5, 1});
  CudaContext ctx;
  for (const bool bidirectional : {false, true})
    check_case(ctx, RnnSpec{RnnType::kGru, bidirectional, false}, Batch{{4, 13, 8}, lengths},
               Mode::kTraining, bidirectional ? 1321 : 1320, Precision::kBf16,
               /*persistent=*/false, 1296);
}

INSTANTIATE_TEST_SUITE_P(
    Specs, CudaRnnLayerTest,
    ::testing::Values(RnnSpec{RnnType::kRelu, false, false}, RnnSpec{RnnType::kRelu, true, false},
                      RnnSpec{RnnType::kRelu, false, true}, RnnSpec{RnnType::kRelu, true, true},
                      RnnSpec{RnnType::kGru, false, false}, RnnSpec{RnnType::kGru, true, false},
                      RnnSpec{RnnType::kGru, false, true}, RnnSpec{RnnType::kGru, true, true}),
    [](const ::testing::TestParamInfo<RnnSpec>& info) { return spec_name(info.param); });

// Residual layers (input width = hidden width), on the GEMM path (batch 5) and the persistent one
// (batch 1 and 4 fit a persistent plan), with input and gradient padding that must not leak.
TEST(CudaRnnLayer, ResidualMatchesCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  const Batch batches[] = {{{9, 4, kHidden}, {9, 0, 5, 3}},
                           {{21, 1, kHidden}, {21}},
                           {{6, 5, kHidden}, {6, 2, 6, 1, 4}}};
  uint64_t seed = 900;
  for (const RnnSpec spec :
       {RnnSpec{RnnType::kRelu, true, true, true}, RnnSpec{RnnType::kRelu, false, false, true},
        RnnSpec{RnnType::kGru, true, true, true}})
    for (const Batch& b : batches)
      for (Mode m : {Mode::kTraining, Mode::kInference}) check_case(ctx, spec, b, m, ++seed);
}

// Two identical training steps give bitwise identical results (fixed-order reductions, no
// atomics, both streams), and the second allocates nothing on the device.
TEST(CudaRnnLayer, RepeatIsBitwiseIdenticalAndAllocationFree) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  // ReLU on the persistent path, ReLU and GRU on the GEMM path, whose recurrences are captured
  // into CUDA graphs on the second run (the shape repeats) and replayed on the third: both must
  // give the first run's bits.
  const std::pair<RnnType, bool> variants[] = {
      {RnnType::kRelu, true}, {RnnType::kRelu, false}, {RnnType::kGru, false}};
  for (const auto& [type, persistent] : variants) {
    SCOPED_TRACE(rnn_type_name(type) + (persistent ? " persistent" : " gemm"));
    Rng rng(17);
    const int T = 33, B = 6, in = 24, H = 64;
    const std::vector<int> lengths{33, 20, 0, 32, 7, 33};
    RnnLayerPair layer(ctx, rng, "rnn", in, H, type, /*bidirectional=*/true, /*batch_norm=*/true);
    CudaRnnLayer& gpu = layer.gpu;
    DeviceParameters& params = layer.params;
    gpu.set_use_persistent(persistent);
    DeviceSequences xd, yd, dyd, dxd;
    upload(random_sequences({T, B, in}, lengths, rng), xd, ctx.stream());
    upload(random_sequences({T, B, H}, lengths, rng), dyd, ctx.stream());
    Tensor y[3], dx[3], grads[3], buffers[3];
    int64_t allocations = 0;
    for (int run = 0; run < 3; ++run) {
      params.upload_from(layer.store);
      params.zero_grads();
      if (run == 1) allocations = device_allocations();
      gpu.forward(xd, yd, true);
      gpu.backward(xd, yd, dyd, dxd);
      if (run == 1) {
        EXPECT_EQ(device_allocations(), allocations) << "second step allocated";
      }
      y[run] = download_tensor(yd.data, ctx);
      dx[run] = download_tensor(dxd.data, ctx);
      params.download_grads(grads[run]);
      ParameterStore mirror;
      RnnLayer mirror_layer("rnn", mirror, in, H, type, true, true, 20.0f, 0.1f);
      mirror.finalize();
      params.download_to(mirror);
      buffers[run] = mirror.buffers();
    }
    for (int run = 1; run < 3; ++run) {
      expect_close(y[0], y[run], 0, 0, "forward repeat " + std::to_string(run));
      expect_close(dx[0], dx[run], 0, 0, "dx repeat " + std::to_string(run));
      expect_close(grads[0], grads[run], 0, 0, "grads repeat " + std::to_string(run));
      expect_close(buffers[0], buffers[run], 0, 0, "running statistics repeat");
    }
    EXPECT_EQ(gpu.ran_persistent(), persistent);
    if (!persistent)
      EXPECT_EQ(gpu.graph_replays(), 4) << "runs 2 and 3: forward and backward graphs";
  }
}

// A pruned bidirectional layer (U at 10% density, both directions, batch norm): with its masks
// set it runs the sparse persistent recurrence, and still matches the CPU layer on the masked
// weights (forward, dx, every gradient: dU is dense, the engine masks it); clearing the masks
// goes back to the dense kernel with the same results.
TEST(CudaRnnLayer, PrunedLayerRunsSparseAndMatchesCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(31);
  const int T = 11, B = 4, in = 24, H = 512;
  const std::vector<int> lengths{11, 0, 7, 10};
  ParameterStore store;
  RnnLayer cpu("rnn", store, in, H, RnnType::kRelu, /*bidirectional=*/true, /*batch_norm=*/true,
               kClip, 0.1f);
  store.finalize();
  store.initialize(rng);
  std::vector<uint8_t> masks[2];
  for (int d = 0; d < 2; ++d) {
    masks[d].resize(size_t(H) * H);
    float* u = store.value(cpu.u(d));
    // Kept weights scaled up so the sparse recurrence still carries signal.
    for (size_t i = 0; i < masks[d].size(); ++i) {
      masks[d][i] = rng.uniform(0.0f, 1.0f) < 0.1f ? 1 : 0;
      u[i] = masks[d][i] ? 3.0f * u[i] : 0.0f;
    }
  }
  fill_uniform(store.grads(), rng);
  const Tensor grads0 = store.grads();  // gradients accumulate onto these
  DeviceParameters params(ctx, store);
  upload(grads0.data(), grads0.numel(), params.grads(), ctx.stream());
  CudaRnnLayer gpu(ctx, params, cpu);
  gpu.set_recurrent_masks(masks[0].data(), masks[1].data());

  const Sequences x = random_sequences({T, B, in}, lengths, rng, -1.0f, 1.0f, 3.0f);
  const Sequences dy = random_sequences({T, B, H}, lengths, rng, -1.0f, 1.0f, -4.0f);
  Sequences y_ref, dx_ref;
  cpu.forward(x, y_ref, true);
  cpu.backward(x, y_ref, dy, dx_ref);
  DeviceSequences xd, yd, dyd, dxd;
  upload(x, xd, ctx.stream());
  upload(dy, dyd, ctx.stream());
  Tensor y[2], dx[2];
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run == 0 ? "sparse" : "dense after clearing the masks");
    if (run == 1) {
      gpu.set_recurrent_masks(nullptr, nullptr);
      upload(grads0.data(), grads0.numel(), params.grads(), ctx.stream());
    }
    yd.data.resize({T, B, H});
    poison(yd.data, ctx);
    gpu.forward(xd, yd, true);
    EXPECT_EQ(gpu.ran_sparse(), run == 0) << gpu.recurrence_path();
    std::cout << gpu.recurrence_path() << "\n";
    y[run] = download_tensor(yd.data, ctx);
    expect_close(y_ref.data, y[run], 2e-5, 1e-4, "forward");
    dxd.data.resize({T, B, in});
    poison(dxd.data, ctx);
    gpu.backward(xd, yd, dyd, dxd);
    EXPECT_EQ(gpu.ran_sparse(), run == 0);
    dx[run] = download_tensor(dxd.data, ctx);
    expect_close(dx_ref.data, dx[run], 1e-4, 1e-3, "dx");
    Tensor grads;
    params.download_grads(grads);
    for (const ParamEntry& e : store.parameters())
      expect_close(store.grads().data() + e.offset, grads.data() + e.offset, e.numel, 1e-4, 1e-3,
                   "grad " + e.name);
  }
}

}  // namespace
}  // namespace ds2
