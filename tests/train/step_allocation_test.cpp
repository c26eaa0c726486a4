// The training step (forward, CTC loss, backward, clipping, optimizer) must not allocate once it
// has seen the largest batch: counted by replacing the global operator new for this test binary
// and watching only the test's own thread.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "core/rng.h"
#include "ctc/ctc_loss.h"
#include "nn/model.h"
#include "train/optimizer.h"

namespace {
thread_local bool counting = false;
thread_local long allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  if (counting) ++allocations;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace ds2 {
namespace {

TEST(TrainingStep, DoesNotAllocateAfterTheLargestBatch) {
  ModelConfig mc;
  mc.conv = {{4, 5, 7, 2, 2}};
  mc.rnn_layers = 2;
  mc.rnn_hidden = 12;
  Model model(mc, 20, 6);
  Rng rng(1);
  model.initialize(rng);
  OptimConfig oc;
  auto optimizer = make_optimizer(oc, model.parameters().num_parameters());
  Sequences big, small, grad;
  big.data.resize({40, 3, 20});
  big.lengths = {40, 33, 21};
  small.data.resize({30, 2, 20});
  small.lengths = {30, 17};
  for (Sequences* s : {&big, &small})
    for (int64_t i = 0; i < s->data.numel(); ++i) s->data[i] = rng.uniform(-1, 1);
  const std::vector<std::vector<int>> big_labels = {{1, 2, 3}, {4, 4}, {5}};
  const std::vector<std::vector<int>> small_labels = {{2, 3}, {1}};
  std::vector<double> losses;
  CtcWorkspace ws;
  auto step = [&](const Sequences& x, const std::vector<std::vector<int>>& labels) {
    model.forward(x, true);
    ctc_loss(model.logits(), labels, &losses, &grad, &ws);
    model.parameters().zero_grads();
    model.backward(grad);
    clip_grad_norm(model.parameters().grads(), 1.0);
    optimizer->step(model.parameters().values(), model.parameters().grads(), 1e-3);
  };
  step(big, big_labels);  // warm-up at the largest shape
  counting = true;
  step(small, small_labels);
  step(big, big_labels);
  counting = false;
  EXPECT_EQ(allocations, 0);
  EXPECT_TRUE(std::isfinite(losses[0]));
}

}  // namespace
}  // namespace ds2
