#include "data/loader_threads.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace ds2 {
namespace {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

int auto_loader_threads(int cores, int ranks_on_host) {
  const int share = std::max(1, cores) / std::max(1, ranks_on_host);
  return std::clamp(share - 1, kMinAutoLoaderThreads, kMaxAutoLoaderThreads);
}

int loader_threads(int configured, int ranks_on_host) {
  return configured > 0 ? configured : auto_loader_threads(usable_cores(), ranks_on_host);
}

}  // namespace ds2
