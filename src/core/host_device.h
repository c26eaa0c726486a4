// DS2_HOST_DEVICE marks a function compiled for both the host and the GPU, so a CPU reference and
// its kernel share one definition (rounding, hashing) instead of two that could drift apart.
//
//   DS2_HOST_DEVICE inline float twice(float x) { return 2.0f * x; }
#pragma once

#ifdef __CUDACC__
#define DS2_HOST_DEVICE __host__ __device__
#else
#define DS2_HOST_DEVICE
#endif
