#include "dist/cuda/nccl_gradient_exchange.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/elementwise.h"

#ifdef DS2_HAVE_NCCL
#include <nccl.h>
#endif

namespace ds2::dist {

#ifdef DS2_HAVE_NCCL
namespace {

class NcclGradientExchange : public GradientExchange {
 public:
  NcclGradientExchange(World& world, CudaContext& ctx, float* grads, BucketPlan plan, bool bf16,
                       int max_ctas)
      : world_(world), ctx_(ctx), grads_(grads), plan_(std::move(plan)), bf16_(bf16) {
    DS2_CHECK(world.distributed(), "a gradient exchange needs more than one rank");
    ncclUniqueId id;
    std::string bytes(sizeof id, '\0');
    if (world.rank() == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      std::memcpy(bytes.data(), &id, sizeof id);
    }
    world.broadcast(&bytes, "NCCL id broadcast");
    std::memcpy(&id, bytes.data(), sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so a watchdog thread can abort a hung communicator
    if (max_ctas > 0) {
      config.maxCTAs = max_ctas;
      config.minCTAs = 1;
    }
    ncclResult_t rc = ncclCommInitRankConfig(&comm_, world.size(), id, world.rank(), &config);
    if (rc != ncclInProgress) check(rc, "ncclCommInitRankConfig");
    wait_ready("NCCL communicator setup");
    world.watchdog()->add_abort_hook([comm = comm_] { ncclCommAbort(comm); });
    DS2_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    ready_.resize(plan_.buckets().size());
    for (auto& e : ready_) DS2_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    DS2_CUDA_CHECK(cudaEventCreate(&compute_done_));
    DS2_CUDA_CHECK(cudaEventCreate(&comm_done_));
    if (bf16_) packed_.reserve(std::max<int64_t>(1, plan_.total()));
  }

  ~NcclGradientExchange() override {
    cudaStreamSynchronize(comm_stream_);
    if (comm_ && !world_.watchdog()->fired()) ncclCommDestroy(comm_);
    for (auto e : ready_) cudaEventDestroy(e);
    if (compute_done_) cudaEventDestroy(compute_done_);
    if (comm_done_) cudaEventDestroy(comm_done_);
    if (comm_stream_) cudaStreamDestroy(comm_stream_);
  }

  void begin() override { launched_ = 0; }

  void gradients_ready(size_t layer) override {
    for (int b : plan_.ready_after(layer)) {
      const Bucket& bucket = plan_.buckets()[b];
      ctx_.record_gradients_final(ready_[b]);  // after deferred weight gradients too
      DS2_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, ready_[b], 0));
      float* g = grads_ + bucket.offset;
      const size_t n = static_cast<size_t>(bucket.count);
      if (bf16_) {
        uint16_t* p = packed_.data() + bucket.offset;
        kernels::to_bf16(g, p, bucket.count, comm_stream_);
        launch(ncclAllReduce(p, p, n, ncclBfloat16, ncclSum, comm_, comm_stream_));
        kernels::from_bf16(p, g, bucket.count, comm_stream_);
      } else {
        launch(ncclAllReduce(g, g, n, ncclFloat32, ncclSum, comm_, comm_stream_));
      }
      ++launched_;
    }
  }

  void finish() override {
    DS2_CHECK(launched_ == static_cast<int>(ready_.size()),
              "gradient exchange: " << launched_ << " of " << ready_.size()
                                    << " buckets launched before finish (a layer was skipped)");
    DS2_CUDA_CHECK(cudaEventRecord(compute_done_, ctx_.stream()));
    DS2_CUDA_CHECK(cudaEventRecord(comm_done_, comm_stream_));
    DS2_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream(), comm_done_, 0));
  }

  double exposed_wait_ms() override {
    float ms = 0;
    DS2_CUDA_CHECK(cudaEventElapsedTime(&ms, compute_done_, comm_done_));
    return std::max(0.0f, ms);
  }

  const BucketPlan& plan() const override { return plan_; }

 private:
  void check(ncclResult_t rc, const char* what) {
    DS2_CHECK(rc == ncclSuccess, world_.where()
                                     << ": " << what << " failed at step " << world_.step() << ": "
                                     << ncclGetErrorString(rc) << " " << ncclGetLastError(comm_));
  }

  void launch(ncclResult_t rc) {
    if (rc == ncclInProgress) {
      wait_ready("gradient allreduce launch");
      return;
    }
    check(rc, "ncclAllReduce");
  }

  // A non-blocking communicator reports ncclInProgress until it is ready for the next call.
  void wait_ready(const char* operation) {
    Watchdog::Scope watched(*world_.watchdog(), operation, world_.step());
    ncclResult_t state = ncclInProgress;
    while (true) {
      check(ncclCommGetAsyncError(comm_, &state) == ncclSuccess ? ncclSuccess : ncclInternalError,
            "ncclCommGetAsyncError");
      if (state != ncclInProgress) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    check(state, operation);
  }

  World& world_;
  CudaContext& ctx_;
  float* grads_;
  BucketPlan plan_;
  bool bf16_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  std::vector<cudaEvent_t> ready_;
  cudaEvent_t compute_done_ = nullptr, comm_done_ = nullptr;
  DeviceArray<uint16_t> packed_;
  int launched_ = 0;
};

}  // namespace
#endif

std::unique_ptr<GradientExchange> make_nccl_gradient_exchange(World& world, CudaContext& ctx,
                                                              float* grads, BucketPlan plan,
                                                              bool bf16, int max_ctas) {
#ifdef DS2_HAVE_NCCL
  return std::make_unique<NcclGradientExchange>(world, ctx, grads, std::move(plan), bf16, max_ctas);
#else
  (void)world, (void)ctx, (void)grads, (void)plan, (void)bf16, (void)max_ctas;
  DS2_FAIL(
      "this ds2 was built without NCCL (DS2_WITH_NCCL=OFF or no nccl.h found), so "
      "GPU ranks cannot exchange gradients");
#endif
}

}  // namespace ds2::dist
