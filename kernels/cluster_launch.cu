#include "core/cuda/check.h"
#include "kernels/cluster_launch.h"

namespace ds2::kernels {
namespace {

// Raises fn's shared memory limit to `smem` and allows clusters past the portable 8 CTAs; the
// configuration's attributes point into `attr`.
cudaLaunchConfig_t prepare(const void* fn, int ctas, int cluster, int threads, size_t smem,
                           cudaLaunchAttribute* attr, cudaStream_t stream) {
  DS2_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  if (cluster > 8)
    DS2_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

}  // namespace

void cluster_launch(const void* fn, int ctas, int cluster, int threads, size_t smem, void* args,
                    cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = prepare(fn, ctas, cluster, threads, smem, attr, stream);
  void* params[] = {args};
  DS2_CUDA_CHECK(cudaLaunchKernelExC(&cfg, fn, params));
}

int cluster_max_active(const void* fn, int ctas, int cluster, int threads, size_t smem) {
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = prepare(fn, ctas, cluster, threads, smem, attr, nullptr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // an unlaunchable configuration: report "none"
    clusters = 0;
  }
  return clusters;
}

}  // namespace ds2::kernels
