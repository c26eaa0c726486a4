// Dev measurement, not part of the build: whether cuBLASLt's other algorithms run the GEMM
// recurrence's per-step products (nn/cuda/gemm_recurrence.h) faster than cuBLAS's default choice.
// For each step shape, the default cublasSgemm / cublasGemmEx call and every algorithm
// cublasLtMatmulAlgoGetHeuristic offers (up to 32, 32 MiB workspace), and the first four of those
// again at split-K 2, 4, 8 and 16 where cublasLtMatmulAlgoCheck accepts it, are timed as a CUDA
// graph of 200 calls, as the layers replay their steps; the best's configuration is printed (algo
// id, tile, stages, split-K, reduction scheme). Run on the GPU machine:
//   bash gemm-algos.sh                              # the shapes below
//   bash gemm-algos.sh bf16 relu H B [H B ...]      # listed shapes (bf16|fp32, relu|gru)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "graph_timing.cuh"

// Column-major C[m, n] = op(U) * X with U stored as H x GH (the row-major [GH, H] array):
// forward m = GH, k = H, op T; backward-data m = H, k = GH, op N. X is k x n (ld k).
void run(cublasHandle_t handle, cublasLtHandle_t lt, cudaStream_t s, bool bf16, const char* name,
         int H, int G, int B, bool backward) {
  const int GH = G * H;
  const int m = backward ? H : GH, k = backward ? GH : H, n = B;
  const cublasOperation_t op_u = backward ? CUBLAS_OP_N : CUBLAS_OP_T;
  const size_t esize = bf16 ? 2 : 4;
  void *u, *x, *c, *ws;
  const size_t ws_bytes = 32u << 20;
  CHECK(cudaMalloc(&u, size_t(GH) * H * esize));
  CHECK(cudaMalloc(&x, size_t(k) * n * esize));
  CHECK(cudaMalloc(&c, size_t(m) * n * 4));
  CHECK(cudaMalloc(&ws, ws_bytes));
  CHECK(cudaMemset(u, 0x3c, size_t(GH) * H * esize));
  CHECK(cudaMemset(x, 0x3c, size_t(k) * n * esize));
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const float def = graph_us(s, [&] {
    if (bf16)
      return cublasGemmEx(handle, op_u, CUBLAS_OP_N, m, n, k, &alpha, u, t, H, x, t, k, &beta, c,
                          CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    return cublasSgemm(handle, op_u, CUBLAS_OP_N, m, n, k, &alpha, static_cast<float*>(u), H,
                       static_cast<float*>(x), k, &beta, static_cast<float*>(c),
                       m) == CUBLAS_STATUS_SUCCESS;
  });
  cublasLtMatmulDesc_t desc;
  CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_n = CUBLAS_OP_N;
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_u, sizeof(op_u)));
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK(cublasLtMatrixLayoutCreate(&la, t, H, GH, H));  // stored H x GH either way
  CHECK(cublasLtMatrixLayoutCreate(&lb, t, k, n, k));
  CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
  cublasLtMatmulPreference_t pref;
  CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t wsb = ws_bytes;
  CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                             sizeof(wsb)));
  cublasLtMatmulHeuristicResult_t res[32];
  int returned = 0;
  CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 32, res, &returned));
  std::vector<cublasLtMatmulAlgo_t> algos;
  for (int i = 0; i < returned; ++i) algos.push_back(res[i].algo);
  for (int i = 0; i < std::min(returned, 4); ++i)
    for (int32_t split : {2, 4, 8, 16}) {
      cublasLtMatmulAlgo_t a = res[i].algo;
      CHECK(cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                                 sizeof(split)));
      cublasLtMatmulHeuristicResult_t check;
      if (cublasLtMatmulAlgoCheck(lt, desc, la, lb, lc, lc, &a, &check) == CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= ws_bytes)
        algos.push_back(a);
    }
  float best = 1e9f, first = -1.0f;
  int best_i = -1;
  for (size_t i = 0; i < algos.size(); ++i) {
    const float us = graph_us(s, [&] {
      return cublasLtMatmul(lt, desc, &alpha, u, la, x, lb, &beta, c, lc, c, lc, &algos[i], ws,
                            ws_bytes, s) == CUBLAS_STATUS_SUCCESS;
    });
    if (i == 0) first = us;
    if (us > 0 && us < best) {
      best = us;
      best_i = int(i);
    }
  }
  int32_t id = -1, tile = -1, stages = -1, split = -1, scheme = -1;
  if (best_i >= 0) {
    const cublasLtMatmulAlgo_t& a = algos[best_i];
    size_t w;
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                         sizeof(stages), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof(split),
                                         &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                         sizeof(scheme), &w);
  }
  std::printf(
      "%-5s %-4s H %5d B %3d %-8s default %7.2f  lt[0] %7.2f  best lt[%2d of %2zu] %7.2f  x%.2f"
      "  (algo %d tile %d stages %d split-K %d scheme %d)\n",
      bf16 ? "bf16" : "fp32", name, H, B, backward ? "bwd-data" : "forward", def, first, best_i,
      algos.size(), best, def / best, id, tile, stages, split, scheme);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(u);
  cudaFree(x);
  cudaFree(c);
  cudaFree(ws);
}

int main(int argc, char** argv) {
  const BlasStream bs = blas_stream();
  cudaStream_t s = bs.stream;
  cublasHandle_t handle = bs.blas;
  cublasLtHandle_t lt;
  CHECK(cublasLtCreate(&lt));
  struct Shape {
    bool bf16;
    const char* name;
    int H, G, B;
  };
  std::vector<Shape> shapes = {
      {false, "relu", 512, 1, 64},  {false, "relu", 2048, 1, 64}, {false, "relu", 3072, 1, 64},
      {false, "relu", 1920, 1, 64}, {false, "relu", 1536, 1, 64}, {false, "relu", 2048, 1, 48},
      {false, "gru", 256, 3, 64},   {false, "gru", 512, 3, 32},   {false, "gru", 1024, 3, 64},
      {false, "gru", 1536, 3, 48},  {true, "relu", 4096, 1, 64},  {true, "relu", 3328, 1, 24},
      {true, "gru", 1104, 3, 48},   {true, "gru", 1704, 3, 16},   {true, "gru", 2048, 3, 16},
  };
  if (argc > 3) {
    const bool bf16 = std::strcmp(argv[1], "bf16") == 0;
    const bool gru = std::strcmp(argv[2], "gru") == 0;
    shapes.clear();
    for (int i = 3; i + 1 < argc; i += 2)
      shapes.push_back(
          {bf16, gru ? "gru" : "relu", std::atoi(argv[i]), gru ? 3 : 1, std::atoi(argv[i + 1])});
  }
  for (const Shape& sh : shapes)
    for (bool backward : {false, true})
      run(handle, lt, s, sh.bf16, sh.name, sh.H, sh.G, sh.B, backward);
  return 0;
}
