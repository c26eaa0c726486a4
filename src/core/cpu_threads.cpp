#include "core/cpu_threads.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace ds2 {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {

std::atomic<int> configured_threads{0};  // 0 until set_cpu_threads or first use
std::once_flag default_threads_once;

void ensure_configured() {
  std::call_once(default_threads_once, [] {
    if (configured_threads.load() == 0) set_cpu_threads(0);
  });
}

// Helper threads for run_parts; grows to the most parts asked for, never shrinks. Leaked on
// purpose: detached helpers may still wait on its members while statics are destroyed.
class Helpers {
 public:
  static Helpers& instance() {
    static Helpers* helpers = new Helpers;
    return *helpers;
  }

  // Starts parts 1 .. parts-1 on helpers; false (nothing started) when another caller holds them.
  bool try_start(int parts, PartsTask task) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (busy_) return false;
    busy_ = true;
    try {
      while (static_cast<int>(threads_.size()) < parts - 1) {
        const int index = static_cast<int>(threads_.size());
        // It starts waiting after this call has moved the generation on: it must count this
        // generation, not the one it will first read, as new.
        threads_.emplace_back([this, index, seen = generation_] { loop(index + 1, seen); });
        threads_.back().detach();
      }
    } catch (const std::system_error&) {
      busy_ = false;  // no thread to be had: the caller runs the parts itself
      return false;
    }
    parts_ = parts;
    task_ = task;
    remaining_ = parts - 1;
    error_ = nullptr;
    ++generation_;
    wake_.notify_all();
    return true;
  }

  // Waits for the started parts; returns the first exception one threw.
  std::exception_ptr finish() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return remaining_ == 0; });
    busy_ = false;
    return error_;
  }

 private:
  void loop(int part, uint64_t seen) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (part >= parts_) continue;
      const PartsTask task = task_;
      lock.unlock();
      std::exception_ptr error;
      try {
        task.invoke(task.context, part);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !error_) error_ = error;
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  uint64_t generation_ = 0;
  int parts_ = 0, remaining_ = 0;
  bool busy_ = false;
  PartsTask task_{};
  std::exception_ptr error_;
};

}  // namespace

void set_cpu_threads(int threads, int ranks_on_host) {
  // Read before the first call below makes BLAS single-threaded.
  static const int blas_default = std::max(1, openblas_get_num_threads());
  if (threads <= 0) threads = std::max(1, blas_default / std::max(1, ranks_on_host));
  configured_threads.store(threads);
  openblas_set_num_threads(1);
}

int cpu_threads() {
  ensure_configured();
  return configured_threads.load();
}

void run_parts(int parts, PartsTask task) {
  if (parts <= 0) return;
  if (parts == 1 || cpu_threads() < 2 || !Helpers::instance().try_start(parts, task)) {
    for (int part = 0; part < parts; ++part) task.invoke(task.context, part);
    return;
  }
  std::exception_ptr error;
  try {
    task.invoke(task.context, 0);
  } catch (...) {
    error = std::current_exception();
  }
  const std::exception_ptr helper_error = Helpers::instance().finish();
  if (error) std::rethrow_exception(error);
  if (helper_error) std::rethrow_exception(helper_error);
}

}  // namespace ds2
