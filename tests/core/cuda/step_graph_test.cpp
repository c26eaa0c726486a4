// StepGraph (core/cuda/step_graph.h): a key runs eagerly the first time, is captured the second
// time (not necessarily in a row) and replayed after; at most `capacity` graphs are kept, the least
// recently used going first. Each key's work fills a buffer with its own value, so a replay of
// the wrong graph shows; the buffer is poisoned before every run.
#include "core/cuda/step_graph.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "kernels/elementwise.h"
#include "support/cuda_compare.h"

namespace ds2 {
namespace {

TEST(StepGraph, CapturesOnTheSecondSightingAndKeepsTheMostRecentGraphs) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  DeviceArray<float> buffer(257);
  StepGraph graph(/*capacity=*/2);
  const auto run = [&](int64_t key) {
    poison(buffer.data(), buffer.capacity(), ctx);
    graph.run({key, 7}, ctx.stream(), [&] {
      kernels::fill(buffer.data(), buffer.capacity(), static_cast<float>(key) + 0.5f, ctx.stream());
    });
    std::vector<float> host(static_cast<size_t>(buffer.capacity()));
    DS2_CUDA_CHECK(cudaMemcpyAsync(host.data(), buffer.data(), host.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, ctx.stream()));
    ctx.synchronize();
    for (float v : host) ASSERT_EQ(v, static_cast<float>(key) + 0.5f) << "key " << key;
  };
  struct Expect {
    int64_t key, captures, replays;
  };
  // A, B eager; A, B captured; A replayed; C eager, then captured in place of B (least recent);
  // B is new again (eager); A still replays.
  const std::vector<Expect> steps = {{1, 0, 0}, {2, 0, 0}, {1, 1, 1}, {2, 2, 2}, {1, 2, 3},
                                     {3, 2, 3}, {3, 3, 4}, {2, 3, 4}, {1, 3, 5}};
  for (const Expect& e : steps) {
    run(e.key);
    EXPECT_EQ(graph.captures(), e.captures) << "after key " << e.key;
    EXPECT_EQ(graph.replays(), e.replays) << "after key " << e.key;
  }
}

TEST(StepGraph, CapacityOneKeepsTheLastGraph) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  DeviceArray<float> buffer(33);
  StepGraph graph;
  int eager = 0;
  for (int64_t key : {4, 4, 4, 5, 5, 4}) {
    graph.run({key}, ctx.stream(), [&] {
      ++eager;  // counts recordings: eager runs and captures
      kernels::fill(buffer.data(), buffer.capacity(), static_cast<float>(key), ctx.stream());
    });
  }
  ctx.synchronize();
  // 4: eager, capture, replay; 5: eager, then captured in place of 4's graph; 4 again: eager.
  EXPECT_EQ(graph.captures(), 2);
  EXPECT_EQ(graph.replays(), 3);
  EXPECT_EQ(eager, 5);
}

}  // namespace
}  // namespace ds2
