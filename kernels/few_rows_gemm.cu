#include <algorithm>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "kernels/few_rows_gemm.h"
#include "kernels/grid.h"
#include "kernels/mma.cuh"

namespace ds2::kernels {
namespace {

constexpr int kWarps = kFewRowsTileRows / 16;  // one 16-row m-tile of W a warp
constexpr int kThreads = 32 * kWarps;
// CTAs an SM the splits aim at: enough loads in flight to keep the memory system busy.
constexpr int kCtasPerSm = 4;

// Each thread multiplies 8 consecutive k of a W row pair and of its A rows at a time (one 16-byte
// load each), as two m16n8k16 products. The sum over k does not care which k meets which mma
// slot as long as A and W agree, so each thread's 8 k fill its own slots (2q, 2q + 1, 2q + 8,
// 2q + 9 of two products) and every load is 16 contiguous bytes.
template <int MT>
__global__ void __launch_bounds__(kThreads)
    few_rows_gemm_kernel(const uint16_t* __restrict__ a, int lda, const uint16_t* __restrict__ w,
                         int m, int n, int k, int k_per_split, float beta, float* __restrict__ c,
                         int ldc, float* __restrict__ partials, int* __restrict__ counters) {
  // k-blocks of 32 a thread loads at a time: fewer where more A rows come with each.
  constexpr int kUnroll = MT == 1 ? 4 : 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int tile = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int r_lo = tile * kFewRowsTileRows + warp * 16 + g, r_hi = r_lo + 8;
  const int k0 = split * k_per_split, k1 = min(k, k0 + k_per_split);
  // W rows past n read row n - 1; their sums are not stored.
  const uint4* w_lo = reinterpret_cast<const uint4*>(w + int64_t{min(r_lo, n - 1)} * k);
  const uint4* w_hi = reinterpret_cast<const uint4*>(w + int64_t{min(r_hi, n - 1)} * k);
  const uint4* a_row[MT];
  bool a_in[MT];
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const int row = 8 * j + g;
    a_in[j] = row < m;
    a_row[j] = reinterpret_cast<const uint4*>(a + int64_t{a_in[j] ? row : 0} * lda);
  }
  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  // Registers double-buffered: block kb + 32 kUnroll's loads go out before block kb's products,
  // so each thread keeps 2 kUnroll (2 + MT) 16-byte loads in flight (the memory system needs
  // tens of KB in flight an SM; one buffer left the compiler a few loads a thread).
  struct Block {
    uint4 wl[kUnroll], wh[kUnroll], av[kUnroll][MT];
  };
  const uint4 zero = make_uint4(0, 0, 0, 0);
  auto load = [&](Block& blk, int kb) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kk = kb + 32 * u + 8 * q;  // k1 is a multiple of 8: all 8 in range or none
      const bool in = kk < k1;
      // W is read once a product: through L2 only. A is read by every warp of the CTA.
      blk.wl[u] = in ? __ldcg(w_lo + kk / 8) : zero;
      blk.wh[u] = in ? __ldcg(w_hi + kk / 8) : zero;
#pragma unroll
      for (int j = 0; j < MT; ++j) blk.av[u][j] = in && a_in[j] ? __ldg(a_row[j] + kk / 8) : zero;
    }
  };
  auto multiply = [&](const Block& blk) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        float* d = acc[j];
        const uint4& x = blk.av[u][j];
        mma_bf16_16816(d[0], d[1], d[2], d[3], blk.wl[u].x, blk.wh[u].x, blk.wl[u].y, blk.wh[u].y,
                       x.x, x.y);
        mma_bf16_16816(d[0], d[1], d[2], d[3], blk.wl[u].z, blk.wh[u].z, blk.wl[u].w, blk.wh[u].w,
                       x.z, x.w);
      }
  };
  constexpr int kStep = 32 * kUnroll;
  Block cur, next;
  load(cur, k0);
  for (int kb = k0; kb < k1; kb += kStep) {
    if (kb + kStep < k1) load(next, kb + kStep);
    multiply(cur);
    cur = next;
  }

  // acc[j][2 * h + e] is C[8 j + 2 q + e, (h ? r_hi : r_lo)].
  auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = 8 * j + 2 * q + e, col = h ? r_hi : r_lo;
          if (i < m && col < n) f(i, col, acc[j][2 * h + e]);
        }
  };
  auto store = [&](int i, int col, float sum) {
    float* out = c + int64_t{i} * ldc + col;
    *out = beta == 0.0f ? sum : beta * *out + sum;
  };
  if (splits == 1) {
    for_each_output(store);
    return;
  }
  for_each_output(
      [&](int i, int col, float v) { partials[(int64_t{split} * m + i) * n + col] = v; });
  // The last CTA of the tile to finish sums every split's partials in split order.
  __threadfence();
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) last = atomicAdd(&counters[tile], 1) == splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for_each_output([&](int i, int col, float own) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s)
      sum += s == split ? own : __ldcg(&partials[(int64_t{s} * m + i) * n + col]);
    store(i, col, sum);
  });
  if (threadIdx.x == 0) counters[tile] = 0;
}

template <int MT>
void launch(const FewRowsGemm& g, const uint16_t* a, int lda, const uint16_t* w, float beta,
            float* c, int ldc, float* workspace, int* counters, cudaStream_t stream) {
  few_rows_gemm_kernel<MT><<<dim3(g.tiles, g.splits), kThreads, 0, stream>>>(
      a, lda, w, g.m, g.n, g.k, g.k_per_split, beta, c, ldc, workspace, counters);
  DS2_CUDA_CHECK_LAUNCH();
}

__global__ void transpose_to_bf16_kernel(const float* __restrict__ x, int rows, int cols,
                                         uint16_t* __restrict__ y) {
  __shared__ float tile[32][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int r = blockIdx.y * 32 + i;
    if (r < rows && c < cols) tile[i][threadIdx.x] = x[int64_t{r} * cols + c];
  }
  __syncthreads();
  const int r = blockIdx.y * 32 + threadIdx.x;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int col = blockIdx.x * 32 + i;
    if (col < cols && r < rows) y[int64_t{col} * rows + r] = float_to_bf16(tile[threadIdx.x][i]);
  }
}

}  // namespace

FewRowsGemm::FewRowsGemm(int m_, int n_, int k_, int sm_count) : m(m_), n(n_), k(k_) {
  tiles = static_cast<int>(ceil_div(std::max(n, 1), kFewRowsTileRows));
  const int most = std::max(1, k / kFewRowsSplitMinK);
  splits =
      std::clamp(static_cast<int>(ceil_div(kCtasPerSm * std::max(sm_count, 1), tiles)), 1, most);
  k_per_split = static_cast<int>(ceil_div(ceil_div(std::max(k, 1), splits), 32) * 32);
  splits = static_cast<int>(ceil_div(std::max(k, 1), k_per_split));
}

bool FewRowsGemm::supported(const uint16_t* a, int lda, const uint16_t* w) const {
  return m >= 1 && m <= kFewRowsMax && n >= 1 && k >= 8 && k % 8 == 0 && lda % 8 == 0 &&
         aligned_to(a, 16) && aligned_to(w, 16);
}

int64_t FewRowsGemm::workspace_floats() const {
  return splits > 1 ? int64_t{splits} * m * n : 0;
}

void few_rows_gemm_bf16(const FewRowsGemm& g, const uint16_t* a, int lda, const uint16_t* w,
                        float beta, float* c, int ldc, float* workspace, int* counters,
                        cudaStream_t stream) {
  const int mt = static_cast<int>(ceil_div(g.m, 8));
  switch (mt) {
    case 1:
      return launch<1>(g, a, lda, w, beta, c, ldc, workspace, counters, stream);
    case 2:
      return launch<2>(g, a, lda, w, beta, c, ldc, workspace, counters, stream);
    default:
      return launch<2>(g, a, lda, w, beta, c, ldc, workspace, counters, stream);
  }
}

void to_bf16_transposed(const float* x, int rows, int cols, uint16_t* y, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, 32)),
                  static_cast<unsigned>(ceil_div(rows, 32)));
  transpose_to_bf16_kernel<<<grid, dim3(32, 8), 0, stream>>>(x, rows, cols, y);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
