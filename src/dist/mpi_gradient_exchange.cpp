#include <chrono>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "dist/gradient_exchange.h"

namespace ds2::dist {

#ifdef DS2_HAVE_MPI
namespace {

// MPI has no bfloat16 type: the values travel as 16-bit words, summed through float.
void bf16_sum(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

class MpiGradientExchange : public GradientExchange {
 public:
  MpiGradientExchange(World& world, float* grads, BucketPlan plan, bool bf16)
      : world_(world), grads_(grads), plan_(std::move(plan)), bf16_(bf16) {
    requests_.assign(plan_.buckets().size(), MPI_REQUEST_NULL);
    if (bf16_) {
      packed_.resize(static_cast<size_t>(plan_.total()));
      MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_op_);
    }
  }
  ~MpiGradientExchange() override {
    if (bf16_op_ != MPI_OP_NULL) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Op_free(&bf16_op_);
    }
  }

  void begin() override { launched_ = 0; }

  void gradients_ready(size_t layer) override {
    for (int b : plan_.ready_after(layer)) {
      const Bucket& bucket = plan_.buckets()[b];
      float* g = grads_ + bucket.offset;
      int rc;
      if (bf16_) {
        uint16_t* p = packed_.data() + bucket.offset;
        for (int64_t i = 0; i < bucket.count; ++i) p[i] = float_to_bf16(g[i]);
        rc = MPI_Iallreduce(MPI_IN_PLACE, p, static_cast<int>(bucket.count), MPI_UINT16_T, bf16_op_,
                            world_.comm(), &requests_[b]);
      } else {
        rc = MPI_Iallreduce(MPI_IN_PLACE, g, static_cast<int>(bucket.count), MPI_FLOAT, MPI_SUM,
                            world_.comm(), &requests_[b]);
      }
      DS2_CHECK(rc == MPI_SUCCESS, world_.where() << ": MPI_Iallreduce of gradient bucket " << b
                                                  << " failed at step " << world_.step());
      ++launched_;
    }
  }

  void finish() override {
    DS2_CHECK(launched_ == static_cast<int>(requests_.size()),
              "gradient exchange: " << launched_ << " of " << requests_.size()
                                    << " buckets launched before finish (a layer was skipped)");
    const auto start = std::chrono::steady_clock::now();
    {
      Watchdog::Scope watched(*world_.watchdog(), "gradient allreduce", world_.step());
      const int rc =
          MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
      DS2_CHECK(rc == MPI_SUCCESS, world_.where()
                                       << ": gradient allreduce failed at step " << world_.step());
    }
    exposed_ms_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (bf16_) {
      const uint16_t* p = packed_.data();
      for (int64_t i = 0; i < plan_.total(); ++i) grads_[i] = bf16_to_float(p[i]);
    }
  }

  double exposed_wait_ms() override { return exposed_ms_; }
  const BucketPlan& plan() const override { return plan_; }

 private:
  World& world_;
  float* grads_;
  BucketPlan plan_;
  bool bf16_;
  std::vector<uint16_t> packed_;
  std::vector<MPI_Request> requests_;
  MPI_Op bf16_op_ = MPI_OP_NULL;
  int launched_ = 0;
  double exposed_ms_ = 0;
};

}  // namespace
#endif

std::unique_ptr<GradientExchange> make_mpi_gradient_exchange(World& world, float* grads,
                                                             BucketPlan plan, bool bf16) {
  DS2_CHECK(world.distributed(), "a gradient exchange needs more than one rank");
#ifdef DS2_HAVE_MPI
  return std::make_unique<MpiGradientExchange>(world, grads, std::move(plan), bf16);
#else
  (void)grads, (void)plan, (void)bf16;
  DS2_FAIL("this ds2 was built without MPI (DS2_WITH_MPI=OFF or no Open MPI found)");
#endif
}

}  // namespace ds2::dist
