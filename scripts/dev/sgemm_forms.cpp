// Times OpenBLAS's single-threaded sgemm on the CPU recurrence's per-timestep product, C += A op(B)
// with A {M, H} (a batch slice's h_prev) and B {H, H}, in the two forms the layer could call: NT
// (B = U, transposed in the call: OpenBLAS packs it anew on every call) and NN (B = U^T formed
// once, which nn/rnn_layer.cpp does). C has the layer's row stride, 2H (two directions).
//   scripts/dev/sgemm-forms.sh
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

double us_per_call(CBLAS_TRANSPOSE tb, int m, int h, const std::vector<float>& a,
                   const std::vector<float>& b, std::vector<float>& c) {
  const int ldc = 2 * h;
  const int reps = 20000 * 192 / h * 192 / h;
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, h, h, 1.0f, a.data(), h, b.data(), h, 1.0f,
                c.data(), ldc);
  };
  for (int i = 0; i < 100; ++i) call();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) call();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
}

}  // namespace

int main() {
  openblas_set_num_threads(1);
  std::printf("C += A op(B), A {M, H}, single-threaded OpenBLAS, us a call (two rounds each)\n");
  for (int m : {8, 16})
    for (int h : {192, 320, 768}) {
      std::vector<float> a(static_cast<size_t>(m) * h, 0.5f), b(static_cast<size_t>(h) * h, 0.01f);
      std::vector<float> c(static_cast<size_t>(m) * 2 * h, 0.1f);
      const double nt1 = us_per_call(CblasTrans, m, h, a, b, c);
      const double nn1 = us_per_call(CblasNoTrans, m, h, a, b, c);
      const double nt2 = us_per_call(CblasTrans, m, h, a, b, c);
      const double nn2 = us_per_call(CblasNoTrans, m, h, a, b, c);
      std::printf("M %2d H %3d: NT %7.2f %7.2f   NN %7.2f %7.2f\n", m, h, nt1, nt2, nn1, nn2);
    }
}
