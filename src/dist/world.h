// World: the ranks of a distributed run and the host-side collectives between them (MPI), or one
// rank when ds2 was not started by mpirun (or was built without MPI). Every blocking collective is
// watched: one that waits longer than dist.timeout_s (a dead or hung peer) aborts the whole job
// with a message naming this rank, its host, the operation and the step.
//
//   ds2::dist::World& world = ds2::dist::World::get();  // MPI_Init on first use under mpirun
//   double sums[2] = {loss_sum, finite};
//   world.allreduce_sum(sums, 2, "loss reduction");
//   if (world.rank() == 0) save_checkpoint(...);
//   ds2::dist::World::shutdown();                       // at the end of main
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#ifdef DS2_HAVE_MPI
#include <mpi.h>
#endif

#include "dist/watchdog.h"

namespace ds2::dist {

class World {
 public:
  // The process's world; the first call initializes MPI when a launcher (mpirun) started us.
  static World& get();
  // Finalizes MPI if get() initialized it. Call once, at the end of main.
  static void shutdown();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the ranks of this host
  int local_size() const { return local_size_; }  // ranks on this host
  bool distributed() const { return size_ > 1; }
  const std::string& host() const { return host_; }
  // "rank 1 on node-3", for messages.
  std::string where() const;

  // The step that watchdog messages name.
  void set_step(int64_t step) { step_.store(step); }
  int64_t step() const { return step_.load(); }
  void set_timeout(double seconds);
  // The watchdog of blocking collectives; null with one rank.
  Watchdog* watchdog() { return watchdog_.get(); }

  // Collectives: no-ops with one rank. `operation` names them in timeout messages.
  void allreduce_sum(double* values, int count, const char* operation);
  void allreduce_sum(float* values, int64_t count, const char* operation);
  void allreduce_max(double* values, int count, const char* operation);
  // Rank 0's bytes to every rank.
  void broadcast(std::string* bytes, const char* operation);
  void broadcast(float* values, int64_t count, const char* operation);
  // Every rank's value, in rank order.
  std::vector<uint64_t> allgather(uint64_t value, const char* operation);
  void barrier(const char* operation);

  // Prints "ds2 (rank R on HOST): message" to stderr and ends every rank of the job
  // (MPI_Abort). Only for failures the other ranks cannot learn of otherwise.
  [[noreturn]] void abort(const std::string& message, int code = 1);

#ifdef DS2_HAVE_MPI
  MPI_Comm comm() const {
    return MPI_COMM_WORLD;
  }
#endif

 private:
  World();
#ifdef DS2_HAVE_MPI
  // The watched collectives behind the typed ones above (no-ops with one rank).
  void allreduce(void* values, int64_t count, MPI_Datatype type, MPI_Op op, const char* operation);
  void broadcast(void* values, int64_t count, MPI_Datatype type, const char* operation);
#endif
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  bool initialized_mpi_ = false;
  std::atomic<int64_t> step_{0};
  std::unique_ptr<Watchdog> watchdog_;
};

// True when the environment says a launcher started this process as one of several ranks
// (Open MPI's OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK).
bool launched_by_mpi();

}  // namespace ds2::dist
