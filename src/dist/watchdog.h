// Watchdog: a thread that notices a blocking operation (a collective waiting on other ranks) that
// has run longer than a timeout, and then runs the abort hooks (ncclCommAbort, ...) and the
// timeout handler (MPI_Abort in a distributed run), so a hung or dead peer ends the job with a
// message naming the operation and step instead of leaving it waiting forever.
//
//   Watchdog dog(/*timeout_s=*/300, [](const std::string& why) { report_and_abort(why); });
//   {
//     Watchdog::Scope watched(dog, "gradient allreduce", step);
//     MPI_Waitall(...);                    // after 300 s: handler("... gradient allreduce ...")
//   }
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ds2::dist {

class Watchdog {
 public:
  // Called once, from the watchdog's thread, with a message such as "collective 'gradient
  // allreduce' at step 12 did not finish within 300 s (dist.timeout_s)".
  using Handler = std::function<void(const std::string& message)>;

  Watchdog(double timeout_s, Handler on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void set_timeout(double seconds);
  double timeout() const;
  // Run (in order of registration) before the handler, e.g. to abort a NCCL communicator so its
  // kernels stop spinning.
  void add_abort_hook(std::function<void()> hook);
  bool fired() const;

  // Marks one watched operation; scopes do not nest (the inner one would hide the outer).
  class Scope {
   public:
    Scope(Watchdog& dog, const char* operation, int64_t step);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& dog_;
  };

 private:
  void watch();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  double timeout_s_;
  Handler on_timeout_;
  std::vector<std::function<void()>> abort_hooks_;
  const char* operation_ = nullptr;  // the watched operation, or null
  int64_t step_ = 0;
  std::chrono::steady_clock::time_point since_;
  bool stop_ = false, fired_ = false;
  std::thread thread_;
};

}  // namespace ds2::dist
