#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/cuda/check.h"
#include "kernels/ctc_loss.h"

namespace ds2::kernels {
namespace {

// Three launches, each parallel where the math allows:
//   1. log_softmax_kernel: one warp per valid frame -> log_probs [B, T, K] (double).
//   2. recursion_kernel: grid (B, roles). Role 0 runs the alpha recursion and writes the loss,
//      role 1 the beta recursion, role 2 links equal labels into chains for step 3. Threads run
//      across the extended label positions (strides of blockDim, any length), time is a loop
//      with one __syncthreads per step. A step reads the lattice row before it and a chunk of
//      frames' log probabilities from shared memory and writes its row to the global workspace
//      as well (step 3 reads the lattices).
//   3. gradient_kernel: one block per (frame, utterance), every frame of the output, padding
//      included: softmax minus occupancy, where a class's occupancy sums exp(alpha + beta - ll)
//      over its extended positions in a fixed order (a tree for the blank, a chain walk for each
//      label class), so results are identical run to run.

constexpr double kLogZero = -std::numeric_limits<double>::infinity();
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kSoftmaxThreads = 256;   // 8 frames per block
constexpr int kGradientThreads = 128;  // a power of two: the blank sum is a tree
constexpr int kMaxRecursionThreads = 512;
constexpr size_t kAlignment = 256;

enum Role { kAlphaRole = 0, kBetaRole = 1, kChainRole = 2 };

size_t align_up(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// Byte offsets of the workspace's parts.
struct Layout {
  size_t log_probs = 0, alpha = 0, beta = 0, log_likelihood = 0, chain_next = 0, chain_head = 0;
  size_t total = 0;
};

// Per-utterance strides: extended positions (2U+1) and label slots (at least 1).
int64_t lattice_stride(int max_label_length) {
  return 2 * static_cast<int64_t>(max_label_length) + 1;
}
int64_t chain_stride(int max_label_length) {
  return std::max(1, max_label_length);
}

Layout workspace_layout(int T, int B, int K, int max_label_length) {
  const size_t frames = static_cast<size_t>(T) * static_cast<size_t>(B);
  const size_t lattice = frames * static_cast<size_t>(lattice_stride(max_label_length));
  const size_t slots = static_cast<size_t>(B) * static_cast<size_t>(chain_stride(max_label_length));
  Layout l;
  size_t at = 0;
  l.log_probs = at;
  at += align_up(frames * static_cast<size_t>(K) * sizeof(double));
  l.alpha = at;
  at += align_up(lattice * sizeof(double));
  l.beta = at;
  at += align_up(lattice * sizeof(double));
  l.log_likelihood = at;
  at += align_up(static_cast<size_t>(B) * sizeof(double));
  l.chain_next = at;
  at += align_up(slots * sizeof(int));
  l.chain_head = at;
  at += align_up(slots * sizeof(int));
  l.total = at;
  return l;
}

// log(exp(a) + exp(b)), exact when either side is log(0): the CPU reference's log_add.
__device__ __forceinline__ double log_add(double a, double b) {
  if (a == kLogZero) return b;
  if (b == kLogZero) return a;
  return fmax(a, b) + log1p(exp(-fabs(a - b)));
}

// log(exp(a) + exp(b) + exp(c)) for the recursions' three predecessors: the three exponentials
// are independent, so a step waits for one exp and one log instead of two log_add in a row
// (which halves the recursions' time). Rounding differs from the CPU's pairwise log_add by a few
// units in the last place of double.
__device__ __forceinline__ double log_sum3(double a, double b, double c) {
  const double m = fmax(a, fmax(b, c));
  if (m == kLogZero) return kLogZero;
  return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

// Class at extended position s of the label with blanks interleaved (_ l0 _ l1 _ ... _).
__device__ __forceinline__ int extended_class(const int* label, int s) {
  return (s & 1) ? __ldg(label + (s >> 1)) : 0;
}

// A path may jump from s-2 to s only onto a label that differs from the previous label (the
// blank between equal labels is mandatory): the CPU's can_skip_to.
__device__ __forceinline__ bool can_skip_to(const int* label, int s) {
  return (s & 1) && s >= 3 && __ldg(label + (s >> 1)) != __ldg(label + (s >> 1) - 1);
}

__device__ __forceinline__ double warp_max(double v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Butterfly sum: every lane ends with the same, launch-independent value.
__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void log_softmax_kernel(const float* __restrict__ logits, int T, int B, int K,
                                   const int* __restrict__ input_lengths,
                                   double* __restrict__ log_probs) {
  const int warps_per_block = blockDim.x / 32;
  const int64_t frame = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (frame >= static_cast<int64_t>(T) * B) return;  // whole warps leave together
  const int t = static_cast<int>(frame / B), b = static_cast<int>(frame % B);
  if (t >= input_lengths[b]) return;  // padding frames are never read
  const float* x = logits + frame * K;
  double max_x = kLogZero;
  for (int k = lane; k < K; k += 32) max_x = fmax(max_x, static_cast<double>(x[k]));
  max_x = warp_max(max_x);
  double sum = 0.0;
  for (int k = lane; k < K; k += 32) sum += exp(static_cast<double>(x[k]) - max_x);
  sum = warp_sum(sum);
  const double log_norm = max_x + log(sum);
  double* out = log_probs + (static_cast<int64_t>(b) * T + t) * K;
  for (int k = lane; k < K; k += 32) out[k] = static_cast<double>(x[k]) - log_norm;
}

// The recursions' shared memory: two lattice rows (the step before and this one), the log
// probabilities of a chunk of frames, and per extended position its class and whether the s-2 jump
// is allowed. A step then reads only shared memory, and frames come from global memory in bulk,
// once per chunk, instead of one dependent L2 round trip per step.
struct RecursionSmem {
  int chunk_frames = 0;
  size_t rows = 0, chunk = 0, classes = 0, skips = 0, total = 0;  // byte offsets, total size
};

constexpr size_t kChunkBytes = 16 * 1024;
constexpr int kMaxChunkFrames = 64;

RecursionSmem recursion_smem(int64_t S_stride, int K) {
  RecursionSmem m;
  const size_t row_bytes = static_cast<size_t>(K) * sizeof(double);
  m.chunk_frames = static_cast<int>(
      std::max<size_t>(1, std::min<size_t>(kMaxChunkFrames, kChunkBytes / row_bytes)));
  m.rows = 0;
  m.chunk = m.rows + 2 * static_cast<size_t>(S_stride) * sizeof(double);
  m.classes = m.chunk + static_cast<size_t>(m.chunk_frames) * row_bytes;
  m.skips = m.classes + static_cast<size_t>(S_stride) * sizeof(int);
  m.total = m.skips + static_cast<size_t>(S_stride);
  return m;
}

// Frames [lo, lo + C) of one utterance's log probabilities (rows past `frames` left as they are).
__device__ __forceinline__ void load_chunk(const double* lp, int lo, int C, int K, int frames,
                                           double* chunk) {
  const int rows = min(C, frames - lo);
  const double* src = lp + static_cast<int64_t>(lo) * K;
  for (int i = threadIdx.x; i < rows * K; i += blockDim.x) chunk[i] = src[i];
}

__global__ void recursion_kernel(const double* __restrict__ log_probs, int T, int K,
                                 const int* __restrict__ input_lengths,
                                 const int* __restrict__ labels,
                                 const int* __restrict__ label_offsets, int64_t S_stride,
                                 int64_t slot_stride, RecursionSmem layout, double* alpha,
                                 double* beta, double* __restrict__ log_likelihood,
                                 double* __restrict__ losses, int* __restrict__ chain_next,
                                 int* __restrict__ chain_head) {
  const int b = blockIdx.x;
  const int role = blockIdx.y;
  const int tid = threadIdx.x, threads = blockDim.x;
  const int frames = input_lengths[b];
  const int* label = labels + label_offsets[b];
  const int U = label_offsets[b + 1] - label_offsets[b];
  const int S = 2 * U + 1;

  if (role == kChainRole) {
    // chain_next[i]: the next position with the same class (-1 at the end); chain_head[i]: i is
    // the class's first position. O(U^2 / threads), once per utterance.
    int* next = chain_next + b * slot_stride;
    int* head = chain_head + b * slot_stride;
    for (int i = tid; i < U; i += threads) {
      const int c = label[i];
      int n = -1;
      for (int j = i + 1; j < U && n < 0; ++j)
        if (label[j] == c) n = j;
      int first = 1;
      for (int j = 0; j < i && first; ++j)
        if (label[j] == c) first = 0;
      next[i] = n;
      head[i] = first;
    }
    return;
  }

  extern __shared__ __align__(16) unsigned char smem[];
  double* rows = reinterpret_cast<double*>(smem + layout.rows);
  double* chunk = reinterpret_cast<double*>(smem + layout.chunk);
  int* cls = reinterpret_cast<int*>(smem + layout.classes);
  unsigned char* skip = smem + layout.skips;
  const int C = layout.chunk_frames;

  // Fewest frames that emit the label: one per label plus a blank between equal neighbours
  // (ctc_min_frames). Integer atomics, so the count is exact.
  __shared__ int repeats;
  if (tid == 0) repeats = 0;
  for (int s = tid; s < S; s += threads) {
    cls[s] = extended_class(label, s);
    skip[s] = can_skip_to(label, s) ? 1 : 0;
  }
  __syncthreads();
  int mine = 0;
  for (int i = tid + 1; i < U; i += threads) mine += (label[i] == label[i - 1]) ? 1 : 0;
  if (mine) atomicAdd(&repeats, mine);
  __syncthreads();
  const bool feasible = frames > 0 && frames >= U + repeats;

  const double* lp = log_probs + static_cast<int64_t>(b) * T * K;
  if (role == kAlphaRole) {
    if (!feasible) {
      if (tid == 0) {
        // Zero frames emit exactly the empty label.
        const bool empty_ok = frames == 0 && U == 0;
        log_likelihood[b] = empty_ok ? 0.0 : kLogZero;
        losses[b] = empty_ok ? 0.0 : kInfinity;
      }
      return;
    }
    // alpha[t][s]: log probability of emitting frames 0..t and being at position s at t.
    double* A = alpha + static_cast<int64_t>(b) * T * S_stride;
    load_chunk(lp, 0, C, K, frames, chunk);
    __syncthreads();
    for (int s = tid; s < S; s += threads) {
      const double a = (s < 2) ? chunk[cls[s]] : kLogZero;
      rows[s] = a;
      A[s] = a;
    }
    __syncthreads();
    for (int t = 1; t < frames; ++t) {
      if (t % C == 0) {  // the same for every thread: the barriers are uniform
        load_chunk(lp, t, C, K, frames, chunk);
        __syncthreads();
      }
      const double* prev = rows + ((t - 1) & 1) * S_stride;
      double* cur = rows + (t & 1) * S_stride;
      const double* lp_t = chunk + (t % C) * K;
      double* out = A + t * S_stride;
      for (int s = tid; s < S; s += threads) {
        const double sum =
            log_sum3(prev[s], s >= 1 ? prev[s - 1] : kLogZero, skip[s] ? prev[s - 2] : kLogZero);
        const double a = (sum == kLogZero) ? kLogZero : sum + lp_t[cls[s]];
        cur[s] = a;
        out[s] = a;
      }
      __syncthreads();
    }
    if (tid == 0) {
      const double* last = rows + ((frames - 1) & 1) * S_stride;
      const double ll = (S > 1) ? log_add(last[S - 1], last[S - 2]) : last[S - 1];
      log_likelihood[b] = ll;
      // Every path has probability 0 (logits of -inf): infeasible too.
      losses[b] = (ll == kLogZero) ? kInfinity : -ll;
    }
    return;
  }

  // Role beta. beta[t][s]: log probability of emitting frames t+1.. given position s at t (frame
  // t's own emission is left out, so alpha + beta is the path mass through (t, s)). Chunks run
  // downwards: [lo, lo + C) holds frame t + 1 at row t + 1 - lo.
  if (!feasible) return;
  double* Bt = beta + static_cast<int64_t>(b) * T * S_stride;
  double* last = Bt + (frames - 1) * S_stride;
  for (int s = tid; s < S; s += threads) {
    const double v = (s >= S - 2) ? 0.0 : kLogZero;
    rows[((frames - 1) & 1) * S_stride + s] = v;
    last[s] = v;
  }
  int lo = frames;  // no chunk loaded yet
  for (int t = frames - 2; t >= 0; --t) {
    if (t + 1 < lo) {   // uniform, as above
      __syncthreads();  // the previous chunk's readers are done
      lo = max(0, t + 2 - C);
      load_chunk(lp, lo, C, K, frames, chunk);
    }
    __syncthreads();
    const double* next = rows + ((t + 1) & 1) * S_stride;
    double* cur = rows + (t & 1) * S_stride;
    const double* lp_next = chunk + (t + 1 - lo) * K;
    double* out = Bt + t * S_stride;
    for (int s = tid; s < S; s += threads) {
      const double sum = log_sum3(
          next[s] + lp_next[cls[s]], s + 1 < S ? next[s + 1] + lp_next[cls[s + 1]] : kLogZero,
          s + 2 < S && skip[s + 2] ? next[s + 2] + lp_next[cls[s + 2]] : kLogZero);
      cur[s] = sum;
      out[s] = sum;
    }
  }
}

__global__ void __launch_bounds__(kGradientThreads)
    gradient_kernel(const double* __restrict__ log_probs, int T, int B, int K,
                    const int* __restrict__ input_lengths, const int* __restrict__ labels,
                    const int* __restrict__ label_offsets, int64_t S_stride, int64_t slot_stride,
                    const double* __restrict__ alpha, const double* __restrict__ beta,
                    const double* __restrict__ log_likelihood, const int* __restrict__ chain_next,
                    const int* __restrict__ chain_head, float* gradient) {
  const int t = blockIdx.x, b = blockIdx.y;
  const int tid = threadIdx.x;
  float* g = gradient + (static_cast<int64_t>(t) * B + b) * K;
  const double ll = log_likelihood[b];
  if (t >= input_lengths[b] || ll == kLogZero) {  // padding, or an utterance with no alignment
    for (int k = tid; k < K; k += kGradientThreads) g[k] = 0.0f;
    return;
  }
  const int* label = labels + label_offsets[b];
  const int U = label_offsets[b + 1] - label_offsets[b];
  const int64_t row = static_cast<int64_t>(b) * T + t;
  const double* lp = log_probs + row * K;
  const double* a = alpha + row * S_stride;
  const double* be = beta + row * S_stride;
  const int* next = chain_next + b * slot_stride;
  const int* head = chain_head + b * slot_stride;

  // Classes absent from the label have occupancy 0; the blank and label classes are rewritten
  // below, after the barrier of the reduction orders the two writes.
  for (int k = tid; k < K; k += kGradientThreads) g[k] = static_cast<float>(exp(lp[k]));

  __shared__ double partial[kGradientThreads];
  double blank = 0.0;
  for (int j = tid; j <= U; j += kGradientThreads) {
    const double mass = a[2 * j] + be[2 * j];
    if (mass != kLogZero) blank += exp(mass - ll);
  }
  partial[tid] = blank;
  __syncthreads();
  for (int stride = kGradientThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }

  // Each class's first label position walks the chain of its equal labels.
  for (int i = tid; i < U; i += kGradientThreads) {
    if (!head[i]) continue;
    double occupancy = 0.0;
    for (int j = i; j >= 0; j = next[j]) {
      const int s = 2 * j + 1;
      const double mass = a[s] + be[s];
      if (mass != kLogZero) occupancy += exp(mass - ll);
    }
    const int c = label[i];
    g[c] = static_cast<float>(exp(lp[c]) - occupancy);
  }
  if (tid == 0) g[0] = static_cast<float>(exp(lp[0]) - partial[0]);
}

void check_sizes(int max_frames, int batch, int alphabet_size, int max_label_length) {
  DS2_CHECK(max_frames >= 0 && batch >= 0 && alphabet_size >= 1,
            "ctc_loss (CUDA): bad shape [" << max_frames << ", " << batch << ", " << alphabet_size
                                           << "] (alphabet_size counts the blank)");
  DS2_CHECK(max_label_length >= 0 && max_label_length < (1 << 29),
            "ctc_loss (CUDA): bad max_label_length " << max_label_length);
}

}  // namespace

size_t ctc_workspace_bytes(int max_frames, int batch, int alphabet_size, int max_label_length) {
  check_sizes(max_frames, batch, alphabet_size, max_label_length);
  return workspace_layout(max_frames, batch, alphabet_size, max_label_length).total;
}

void ctc_loss(const float* logits, int max_frames, int batch, int alphabet_size,
              const int* input_lengths, const int* labels, const int* label_offsets,
              int max_label_length, double* losses, float* gradient, void* workspace,
              size_t workspace_bytes, cudaStream_t stream) {
  check_sizes(max_frames, batch, alphabet_size, max_label_length);
  if (batch == 0) return;
  DS2_CHECK(batch <= 65535, "ctc_loss (CUDA): batch " << batch << " over 65535");
  const Layout layout = workspace_layout(max_frames, batch, alphabet_size, max_label_length);
  DS2_CHECK(workspace != nullptr && workspace_bytes >= layout.total,
            "ctc_loss (CUDA): workspace of " << workspace_bytes << " bytes at " << workspace
                                             << ", need " << layout.total);
  DS2_CHECK(reinterpret_cast<uintptr_t>(workspace) % alignof(double) == 0,
            "ctc_loss (CUDA): workspace must be 8-byte aligned");
  DS2_CHECK(input_lengths && labels && label_offsets && losses && (logits || max_frames == 0),
            "ctc_loss (CUDA): null input or output pointer");

  char* base = static_cast<char*>(workspace);
  double* log_probs = reinterpret_cast<double*>(base + layout.log_probs);
  double* alpha = reinterpret_cast<double*>(base + layout.alpha);
  double* beta = reinterpret_cast<double*>(base + layout.beta);
  double* log_likelihood = reinterpret_cast<double*>(base + layout.log_likelihood);
  int* chain_next = reinterpret_cast<int*>(base + layout.chain_next);
  int* chain_head = reinterpret_cast<int*>(base + layout.chain_head);
  const int64_t S_stride = lattice_stride(max_label_length);
  const int64_t slot_stride = chain_stride(max_label_length);
  const int T = max_frames, B = batch, K = alphabet_size;

  const int64_t frames = static_cast<int64_t>(T) * B;
  if (frames > 0) {
    const int64_t frames_per_block = kSoftmaxThreads / 32;
    const int64_t blocks = (frames + frames_per_block - 1) / frames_per_block;
    DS2_CHECK(blocks < (int64_t{1} << 31), "ctc_loss (CUDA): too many frames " << frames);
    log_softmax_kernel<<<static_cast<unsigned>(blocks), kSoftmaxThreads, 0, stream>>>(
        logits, T, B, K, input_lengths, log_probs);
    DS2_CUDA_CHECK_LAUNCH();
  }

  // Enough threads to cover the longest extended label in one pass where possible.
  const int64_t wanted = (S_stride + 31) / 32 * 32;
  const int recursion_threads = static_cast<int>(std::min<int64_t>(wanted, kMaxRecursionThreads));
  const dim3 recursion_grid(B, gradient ? 3 : 1);
  const RecursionSmem smem = recursion_smem(S_stride, K);
  if (smem.total > 48 * 1024) {
    int device = 0, limit = 0;
    DS2_CUDA_CHECK(cudaGetDevice(&device));
    DS2_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    DS2_CHECK(smem.total + sizeof(int) <= static_cast<size_t>(limit),  // + `repeats`
              "ctc_loss (CUDA): a label of " << max_label_length << " symbols over an alphabet of "
                                             << K << " needs " << smem.total
                                             << " bytes of shared memory, over this GPU's " << limit
                                             << " (train on the CPU backend)");
    DS2_CUDA_CHECK(cudaFuncSetAttribute(recursion_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem.total)));
  }
  recursion_kernel<<<recursion_grid, recursion_threads, smem.total, stream>>>(
      log_probs, T, K, input_lengths, labels, label_offsets, S_stride, slot_stride, smem, alpha,
      beta, log_likelihood, losses, chain_next, chain_head);
  DS2_CUDA_CHECK_LAUNCH();

  if (gradient && T > 0) {
    gradient_kernel<<<dim3(T, B), kGradientThreads, 0, stream>>>(
        log_probs, T, B, K, input_lengths, labels, label_offsets, S_stride, slot_stride, alpha,
        beta, log_likelihood, chain_next, chain_head, gradient);
    DS2_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace ds2::kernels
