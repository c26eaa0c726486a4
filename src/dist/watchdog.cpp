#include "dist/watchdog.h"

#include <cstdio>

#include "core/error.h"

namespace ds2::dist {

Watchdog::Watchdog(double timeout_s, Handler on_timeout)
    : timeout_s_(timeout_s), on_timeout_(std::move(on_timeout)) {
  DS2_CHECK(timeout_s > 0, "dist.timeout_s must be positive, got " << timeout_s);
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::set_timeout(double seconds) {
  DS2_CHECK(seconds > 0, "dist.timeout_s must be positive, got " << seconds);
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_s_ = seconds;
}

double Watchdog::timeout() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timeout_s_;
}

void Watchdog::add_abort_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  abort_hooks_.push_back(std::move(hook));
}

bool Watchdog::fired() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fired_;
}

Watchdog::Scope::Scope(Watchdog& dog, const char* operation, int64_t step) : dog_(dog) {
  std::lock_guard<std::mutex> lock(dog_.mutex_);
  dog_.operation_ = operation;
  dog_.step_ = step;
  dog_.since_ = std::chrono::steady_clock::now();
}

Watchdog::Scope::~Scope() {
  std::lock_guard<std::mutex> lock(dog_.mutex_);
  dog_.operation_ = nullptr;
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    // A tenth of a second keeps the reaction prompt at a negligible cost.
    wake_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_ || fired_ || operation_ == nullptr) continue;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
    if (waited <= timeout_s_) continue;
    fired_ = true;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "collective '%s' at step %lld did not finish within %g s (dist.timeout_s)",
                  operation_, static_cast<long long>(step_), timeout_s_);
    const std::string message = buf;
    auto hooks = abort_hooks_;
    Handler handler = on_timeout_;
    lock.unlock();
    for (auto& hook : hooks) hook();
    handler(message);
    lock.lock();
  }
}

}  // namespace ds2::dist
