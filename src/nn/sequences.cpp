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

void check_sequence_shape(const Shape& shape, const std::vector<int>& lengths,
                          const std::string& where) {
  DS2_CHECK(shape.size() >= 3, where << ": expected {T, B, ...} data, got shape " << shape_str(shape));
  DS2_CHECK(static_cast<int64_t>(lengths.size()) == shape[1],
            where << ": " << lengths.size() << " lengths for a batch of " << shape[1]);
  for (size_t b = 0; b < lengths.size(); ++b)
    DS2_CHECK(lengths[b] >= 0 && lengths[b] <= shape[0],
              where << ": length " << lengths[b] << " of utterance " << b << " outside [0, "
                    << shape[0] << "]");
}

void check_sequences(const Sequences& seq, const std::string& where) {
  check_sequence_shape(seq.data.shape(), seq.lengths, where);
}

}  // namespace ds2
