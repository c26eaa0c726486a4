#include "nn/sequences.h"

#include <algorithm>

namespace ds2 {

void zero_padding(Sequences& seq) {
  const int64_t T = seq.time(), B = seq.batch(), F = seq.frame_size();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      if (t >= seq.lengths[b]) {
        float* p = seq.data.data() + (t * B + b) * F;
        std::fill(p, p + F, 0.0f);
      }
}

}  // namespace ds2
