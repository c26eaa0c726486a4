// Bit-for-bit comparison of two checkpoints' tensors, for the exact-resume and equivalence tests
// (CPU and GPU).
//
//   ds2::testing::expect_same_tensors(run_a / "last.ckpt", run_b / "last.ckpt");
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "train/checkpoint.h"

namespace ds2::testing {

// Every tensor of checkpoint `a` (weights, live weights, average, optimizer moments, masks)
// equals its namesake in `b` bit for bit, and neither has a tensor the other lacks.
inline void expect_same_tensors(const std::filesystem::path& a, const std::filesystem::path& b) {
  const Checkpoint x = load_checkpoint(a.string()), y = load_checkpoint(b.string());
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (const auto& t : x.tensors) {
    const NamedTensor* u = y.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    ASSERT_EQ(t.data.size(), u->data.size()) << t.name;
    size_t differ = 0;
    for (size_t i = 0; i < t.data.size(); ++i)
      differ += std::memcmp(&t.data[i], &u->data[i], sizeof(float)) != 0 ? 1 : 0;
    EXPECT_EQ(differ, 0u) << "tensor " << t.name << ": " << differ << " of " << t.data.size()
                          << " values differ";
  }
}

}  // namespace ds2::testing
