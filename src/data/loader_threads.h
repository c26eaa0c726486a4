// How many loader threads a run gets (data.loader_threads): the configured count, or with 0 (the
// default) one per CPU core this process may run on, shared among the ranks on its host, less
// one for the trainer, between kMinAutoLoaderThreads and kMaxAutoLoaderThreads. On a GPU the
// loader is what keeps up with the step: with 2 threads the digits recipe waited for data 85% of
// the time on an H200 (91.1 s), with 12 44% (23.3 s; README, "Using ds2").
//
//   const int threads = ds2::loader_threads(cfg.data.loader_threads, world.local_size());
#pragma once

namespace ds2 {

constexpr int kMinAutoLoaderThreads = 2;
constexpr int kMaxAutoLoaderThreads = 16;

// The automatic count for `cores` usable cores and `ranks_on_host` ranks sharing them.
int auto_loader_threads(int cores, int ranks_on_host);

// `configured` when positive, else auto_loader_threads of this process's usable cores (its CPU
// affinity mask; the hardware's thread count where the mask cannot be read).
int loader_threads(int configured, int ranks_on_host);

}  // namespace ds2
