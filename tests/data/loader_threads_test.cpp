// data.loader_threads: a positive value is taken as given; 0 gives one thread per usable core
// shared among the host's ranks, less one for the trainer, from 2 (the old default, which a
// 2-core machine keeps) to 16.
#include "data/loader_threads.h"

#include <gtest/gtest.h>

namespace ds2 {
namespace {

TEST(LoaderThreads, AutoSharesTheCoresAmongTheHostsRanks) {
  EXPECT_EQ(auto_loader_threads(2, 1), 2);    // CI's machine: as before
  EXPECT_EQ(auto_loader_threads(1, 1), 2);    // never fewer than 2
  EXPECT_EQ(auto_loader_threads(16, 1), 15);  // the H200 machine
  EXPECT_EQ(auto_loader_threads(16, 2), 7);
  EXPECT_EQ(auto_loader_threads(128, 8), 15);
  EXPECT_EQ(auto_loader_threads(64, 1), 16);  // capped
  EXPECT_EQ(auto_loader_threads(16, 0), 15);  // a bad rank count counts as one
}

TEST(LoaderThreads, AGivenCountIsKept) {
  EXPECT_EQ(loader_threads(1, 1), 1);
  EXPECT_EQ(loader_threads(12, 8), 12);
  const int automatic = loader_threads(0, 1);
  EXPECT_GE(automatic, kMinAutoLoaderThreads);
  EXPECT_LE(automatic, kMaxAutoLoaderThreads);
}

}  // namespace
}  // namespace ds2
