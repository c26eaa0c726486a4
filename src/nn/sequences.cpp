#include "nn/sequences.h"

#include <algorithm>

#include "core/error.h"

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

void check_sequences(const Sequences& seq, const std::string& where) {
  DS2_CHECK(seq.data.rank() >= 3,
            where << ": expected {T, B, ...} data, got shape " << shape_str(seq.data.shape()));
  DS2_CHECK(static_cast<int64_t>(seq.lengths.size()) == seq.batch(),
            where << ": " << seq.lengths.size() << " lengths for a batch of " << seq.batch());
  for (size_t b = 0; b < seq.lengths.size(); ++b)
    DS2_CHECK(seq.lengths[b] >= 0 && seq.lengths[b] <= seq.time(),
              where << ": length " << seq.lengths[b] << " of utterance " << b << " outside [0, "
                    << seq.time() << "]");
}

}  // namespace ds2
