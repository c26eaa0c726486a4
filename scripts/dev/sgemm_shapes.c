// Dev measurement, not part of the build: an LD_PRELOAD shim that times every cblas_sgemm call
// and writes, at exit, one line per shape to $SGEMM_SHAPES_OUT (default /tmp/sgemm-shapes.txt):
// seconds (summed over threads), calls, transposes (111 = none, 112 = transposed) and m n k.
// Run with bash scripts/dev/sgemm-shapes.sh -- ds2 bench step configs/fsdd.yaml --steps 3.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*Sgemm)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                      float, float*, int);
struct Shape {
  int ta, tb, m, n, k;
  long calls;
  double seconds;
};
enum { kMaxShapes = 4096 };
static struct Shape shapes[kMaxShapes];
static int count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  static Sgemm real;
  if (!real) real = (Sgemm)dlsym(RTLD_NEXT, "cblas_sgemm");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  pthread_mutex_lock(&lock);
  int i = 0;
  while (i < count && !(shapes[i].ta == ta && shapes[i].tb == tb && shapes[i].m == m &&
                        shapes[i].n == n && shapes[i].k == k))
    ++i;
  if (i == count && count < kMaxShapes) {
    struct Shape fresh = {ta, tb, m, n, k, 0, 0.0};
    shapes[count++] = fresh;
  }
  if (i < count) {
    shapes[i].calls++;
    shapes[i].seconds += s;
  }
  pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void write_shapes(void) {
  const char* path = getenv("SGEMM_SHAPES_OUT");
  FILE* f = fopen(path && *path ? path : "/tmp/sgemm-shapes.txt", "w");
  if (!f) return;
  for (int i = 0; i < count; ++i)
    fprintf(f, "%.4f %ld ta=%d tb=%d m=%d n=%d k=%d\n", shapes[i].seconds, shapes[i].calls,
            shapes[i].ta, shapes[i].tb, shapes[i].m, shapes[i].n, shapes[i].k);
  fclose(f);
}
