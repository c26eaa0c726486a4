// The CPU backend's compute threads. ds2 splits its own work across them (a large GEMM into row
// or column blocks, a recurrent layer's directions and batch slices, the CTC batch, dropout) and
// runs BLAS single-threaded inside each part. OpenBLAS's own threads split every GEMM, small ones
// too: on 2 cores its idle worker spinning in sched_yield took 27% of perf's samples of the
// digits recipe's step, while the recurrence ran one small GEMM a timestep (README, "The CPU
// backend's threads").
//
//   ds2::set_cpu_threads(0);                      // one per usable core (or OPENBLAS_NUM_THREADS)
//   ds2::run_parts(2, [&](int part) { run_direction(part); });   // part 0 on the calling thread
#pragma once

#include <type_traits>

namespace ds2 {

// Cores this process may run on (its affinity mask; the hardware's count where unreadable).
int usable_cores();

// Sets the compute threads and makes BLAS single-threaded. 0: OpenBLAS's default count (which
// follows OPENBLAS_NUM_THREADS, else the cores) shared among `ranks_on_host` processes, at least
// one each. The first cpu_threads() or run_parts() call does this with 0 when nothing has.
void set_cpu_threads(int threads, int ranks_on_host = 1);
int cpu_threads();

// A part of some work, by reference: no copy, no allocation, valid while run_parts waits.
struct PartsTask {
  void (*invoke)(void* context, int part);
  void* context;
};

// Runs part(0) .. part(parts - 1), part 0 on the calling thread and the others on helper threads,
// and returns when all have finished, rethrowing the first exception any part threw. Runs them
// one after the other on the calling thread where helpers cannot help: fewer than 2 compute
// threads, or the helpers busy with another caller's parts (a part that itself calls run_parts,
// as a GEMM inside a recurrent layer's direction does, runs its parts in turn).
void run_parts(int parts, PartsTask task);

template <typename Part>
void run_parts(int parts, Part&& part) {
  using P = std::remove_reference_t<Part>;
  run_parts(parts, PartsTask{[](void* c, int i) { (*static_cast<P*>(c))(i); }, &part});
}

}  // namespace ds2
