#include "dist/world.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "core/error.h"

namespace ds2::dist {

namespace {

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

constexpr double kDefaultTimeoutS = 300;

}  // namespace

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

World& World::get() {
  static World world;
  return world;
}

World::World() : host_(hostname()) {
#ifdef DS2_HAVE_MPI
  if (!launched_by_mpi()) return;
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    // The watchdog calls MPI_Abort from its own thread while the main thread may sit in a
    // collective, which needs full thread support.
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    initialized_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
  // Errors in collectives come back as codes (checked below) rather than ending the process
  // without a word.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (size_ > 1)
    watchdog_ = std::make_unique<Watchdog>(kDefaultTimeoutS, [this](const std::string& message) {
      abort("error: " + message + "; aborting the job", 3);
    });
#endif
}

void World::shutdown() {
#ifdef DS2_HAVE_MPI
  World& w = get();
  w.watchdog_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (w.initialized_mpi_ && !finalized) MPI_Finalize();
#endif
}

std::string World::where() const {
  return "rank " + std::to_string(rank_) + " on " + host_;
}

void World::set_timeout(double seconds) {
  if (watchdog_) watchdog_->set_timeout(seconds);
}

void World::abort(const std::string& message, int code) {
  std::fprintf(stderr, "ds2 (%s): %s\n", where().c_str(), message.c_str());
  std::fflush(stderr);
#ifdef DS2_HAVE_MPI
  if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
  std::abort();  // one rank (or MPI_Abort returned): nothing to end but this process
}

#ifdef DS2_HAVE_MPI
namespace {
void check_mpi(int rc, const World& w, const char* operation) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  DS2_FAIL(w.where() << ": MPI " << operation << " at step " << w.step()
                     << " failed: " << std::string(text, length));
}
}  // namespace
#define DS2_WATCHED_MPI(operation, call)                               \
  do {                                                                 \
    Watchdog::Scope ds2_watched_(*watchdog_, operation, step_.load()); \
    check_mpi(call, *this, operation);                                 \
  } while (0)

// MPI counts are ints: large buffers (weights, checkpoints) go in pieces of 2^28 elements.
template <typename Call>
void in_pieces(int64_t count, Call call) {
  constexpr int64_t kPiece = int64_t{1} << 28;
  for (int64_t at = 0; at < count; at += kPiece)
    call(at, static_cast<int>(std::min(kPiece, count - at)));
}

void World::allreduce(void* values, int64_t count, MPI_Datatype type, MPI_Op op,
                      const char* operation) {
  if (size_ == 1) return;
  int size = 0;
  MPI_Type_size(type, &size);
  in_pieces(count, [&](int64_t at, int n) {
    DS2_WATCHED_MPI(operation, MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(values) + at * size,
                                             n, type, op, MPI_COMM_WORLD));
  });
}

void World::broadcast(void* values, int64_t count, MPI_Datatype type, const char* operation) {
  if (size_ == 1) return;
  int size = 0;
  MPI_Type_size(type, &size);
  in_pieces(count, [&](int64_t at, int n) {
    DS2_WATCHED_MPI(operation,
                    MPI_Bcast(static_cast<char*>(values) + at * size, n, type, 0, MPI_COMM_WORLD));
  });
}
#endif

// Without MPI there is only ever one rank, and every collective below is a no-op.
void World::allreduce_sum(double* values, int count, const char* operation) {
#ifdef DS2_HAVE_MPI
  allreduce(values, count, MPI_DOUBLE, MPI_SUM, operation);
#else
  (void)values, (void)count, (void)operation;
#endif
}

void World::allreduce_sum(float* values, int64_t count, const char* operation) {
#ifdef DS2_HAVE_MPI
  allreduce(values, count, MPI_FLOAT, MPI_SUM, operation);
#else
  (void)values, (void)count, (void)operation;
#endif
}

void World::allreduce_max(double* values, int count, const char* operation) {
#ifdef DS2_HAVE_MPI
  allreduce(values, count, MPI_DOUBLE, MPI_MAX, operation);
#else
  (void)values, (void)count, (void)operation;
#endif
}

void World::broadcast(std::string* bytes, const char* operation) {
  if (size_ == 1) return;
#ifdef DS2_HAVE_MPI
  uint64_t n = bytes->size();
  broadcast(&n, 1, MPI_UINT64_T, operation);
  bytes->resize(n);
  broadcast(bytes->data(), static_cast<int64_t>(n), MPI_BYTE, operation);
#else
  (void)bytes, (void)operation;
#endif
}

void World::broadcast(float* values, int64_t count, const char* operation) {
#ifdef DS2_HAVE_MPI
  broadcast(values, count, MPI_FLOAT, operation);
#else
  (void)values, (void)count, (void)operation;
#endif
}

std::vector<uint64_t> World::allgather(uint64_t value, const char* operation) {
  std::vector<uint64_t> all(static_cast<size_t>(size_), value);
  if (size_ == 1) return all;
#ifdef DS2_HAVE_MPI
  DS2_WATCHED_MPI(operation, MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T,
                                           MPI_COMM_WORLD));
#else
  (void)operation;
#endif
  return all;
}

void World::barrier(const char* operation) {
  if (size_ == 1) return;
#ifdef DS2_HAVE_MPI
  DS2_WATCHED_MPI(operation, MPI_Barrier(MPI_COMM_WORLD));
#else
  (void)operation;
#endif
}

}  // namespace ds2::dist
