#include "core/cpu_threads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ds2 {
namespace {

// Restores the process default when a test changed the thread count.
struct DefaultThreadsAfter {
  ~DefaultThreadsAfter() { set_cpu_threads(0); }
};

TEST(CpuThreads, RunPartsRunsEachPartOnceWithPartZeroOnTheCaller) {
  DefaultThreadsAfter restore;
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    set_cpu_threads(threads);
    EXPECT_EQ(cpu_threads(), threads);
    for (int parts : {1, 2, 3, 4}) {
      std::vector<int> runs(parts, 0);
      std::vector<std::thread::id> ran_on(parts);
      run_parts(parts, [&](int part) {
        ++runs[part];  // each part its own slot: no race
        ran_on[part] = std::this_thread::get_id();
      });
      for (int part = 0; part < parts; ++part) EXPECT_EQ(runs[part], 1) << "part " << part;
      EXPECT_EQ(ran_on[0], std::this_thread::get_id());
      const std::set<std::thread::id> distinct(ran_on.begin(), ran_on.end());
      // One thread: all on the caller. More: each part on its own thread.
      EXPECT_EQ(static_cast<int>(distinct.size()), threads < 2 ? 1 : parts);
    }
  }
}

TEST(CpuThreads, NestedPartsRunInTurnInsideAPart) {
  DefaultThreadsAfter restore;
  set_cpu_threads(2);
  std::atomic<int> inner{0};
  std::vector<std::thread::id> outer_thread(2), inner_thread(6);
  run_parts(2, [&](int outer) {
    outer_thread[outer] = std::this_thread::get_id();
    // The helpers are busy with the outer parts, so these run on the part's own thread.
    run_parts(3, [&](int part) {
      inner_thread[outer * 3 + part] = std::this_thread::get_id();
      ++inner;
    });
  });
  EXPECT_EQ(inner.load(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(inner_thread[i], outer_thread[i / 3]) << i;
}

TEST(CpuThreads, AnExceptionInAnyPartReachesTheCallerAndTheHelpersStayUsable) {
  DefaultThreadsAfter restore;
  set_cpu_threads(3);
  for (int throwing : {0, 1, 2}) {
    std::atomic<int> finished{0};
    EXPECT_THROW(run_parts(3,
                           [&](int part) {
                             if (part == throwing) throw std::runtime_error("part failed");
                             ++finished;
                           }),
                 std::runtime_error)
        << "part " << throwing;
    EXPECT_EQ(finished.load(), 2) << "the other parts still ran to the end";
  }
  std::atomic<int> after{0};
  run_parts(3, [&](int) { ++after; });
  EXPECT_EQ(after.load(), 3);
}

TEST(CpuThreads, UsableCoresIsPositive) {
  EXPECT_GE(usable_cores(), 1);
}

TEST(CpuThreads, TheDefaultIsSharedAmongTheHostsRanks) {
  DefaultThreadsAfter restore;
  set_cpu_threads(0);
  const int all = cpu_threads();
  EXPECT_GE(all, 1);
  set_cpu_threads(0, 2);
  EXPECT_EQ(cpu_threads(), std::max(1, all / 2));
  set_cpu_threads(0, 1000);
  EXPECT_EQ(cpu_threads(), 1);
  set_cpu_threads(3, 1000);  // an explicit count is kept as given
  EXPECT_EQ(cpu_threads(), 3);
}

}  // namespace
}  // namespace ds2
