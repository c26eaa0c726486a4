#include "data/loader_threads.h"

#include <algorithm>

#include "core/cpu_threads.h"

namespace ds2 {

int auto_loader_threads(int cores, int ranks_on_host) {
  const int share = std::max(1, cores) / std::max(1, ranks_on_host);
  return std::clamp(share - 1, kMinAutoLoaderThreads, kMaxAutoLoaderThreads);
}

int loader_threads(int configured, int ranks_on_host) {
  return configured > 0 ? configured : auto_loader_threads(usable_cores(), ranks_on_host);
}

}  // namespace ds2
