#include "dist/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "dist/fault_injection.h"

namespace ds2::dist {
namespace {

TEST(Watchdog, FiresOnceWithOperationAndStepAfterTheHooks) {
  std::mutex m;
  std::string message;
  std::vector<std::string> order;
  Watchdog dog(0.2, [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(m);
    message = why;
    order.push_back("handler");
  });
  dog.add_abort_hook([&] {
    std::lock_guard<std::mutex> lock(m);
    order.push_back("hook");
  });
  {
    Watchdog::Scope watched(dog, "gradient allreduce", 42);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }
  std::lock_guard<std::mutex> lock(m);
  EXPECT_TRUE(dog.fired());
  EXPECT_EQ(message,
            "collective 'gradient allreduce' at step 42 did not finish within 0.2 s "
            "(dist.timeout_s)");
  EXPECT_EQ(order, (std::vector<std::string>{"hook", "handler"}));
}

TEST(Watchdog, QuietWhileOperationsFinishInTime) {
  std::atomic<int> calls{0};
  Watchdog dog(0.3, [&](const std::string&) { ++calls; });
  for (int i = 0; i < 5; ++i) {
    Watchdog::Scope watched(dog, "loss reduction", i);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Idle time between operations does not count.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(calls.load(), 0);
  EXPECT_FALSE(dog.fired());
}

TEST(Watchdog, RejectsANonPositiveTimeout) {
  EXPECT_THROW(Watchdog(0, [](const std::string&) {}), Error);
}

TEST(FaultInjection, ParsesKindRankAndStep) {
  const Fault f = parse_fault("hang@3:120");
  EXPECT_EQ(f.kind, "hang");
  EXPECT_EQ(f.rank, 3);
  EXPECT_EQ(f.step, 120);
  EXPECT_EQ(parse_fault("kill@0:0").kind, "kill");
  EXPECT_EQ(parse_fault("nan@1:5").kind, "nan");
  for (const char* bad :
       {"", "kill", "kill@1", "kill@:3", "kill@1:", "boom@1:2", "kill@x:2", "kill@1:2x"})
    EXPECT_THROW(parse_fault(bad), Error) << bad;
}

}  // namespace
}  // namespace ds2::dist
