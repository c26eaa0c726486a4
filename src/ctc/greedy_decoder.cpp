#include "ctc/greedy_decoder.h"

#include "core/error.h"

namespace ds2 {

void greedy_decode_utterance(const float* logits, int max_frames, int batch, int alphabet_size,
                             int utterance, int length, std::vector<int>* labels) {
  DS2_CHECK(labels != nullptr, "greedy_decode: output is null");
  DS2_CHECK(alphabet_size >= 1, "greedy_decode: alphabet_size must be >= 1, got " << alphabet_size);
  DS2_CHECK(utterance >= 0 && utterance < batch,
            "greedy_decode: utterance " << utterance << " outside a batch of " << batch);
  DS2_CHECK(length >= 0 && length <= max_frames, "greedy_decode: utterance "
                                                     << utterance << " has length " << length
                                                     << " outside [0, " << max_frames << "]");
  labels->clear();
  constexpr int kBlank = 0;
  int previous = kBlank;
  for (int t = 0; t < length; ++t) {
    const float* x = logits + (static_cast<int64_t>(t) * batch + utterance) * alphabet_size;
    int best = 0;
    for (int k = 1; k < alphabet_size; ++k) {
      if (x[k] > x[best]) best = k;
    }
    // A blank between two equal labels keeps them apart, hence `previous` tracks blanks too.
    if (best != kBlank && best != previous) labels->push_back(best);
    previous = best;
  }
}

std::vector<std::vector<int>> greedy_decode(const Sequences& logits) {
  DS2_CHECK(logits.data.rank() == 3,
            "greedy_decode: logits must be {T, B, K}, got " << shape_str(logits.data.shape()));
  const int T = static_cast<int>(logits.data.dim(0));
  const int B = static_cast<int>(logits.data.dim(1));
  const int K = static_cast<int>(logits.data.dim(2));
  DS2_CHECK(static_cast<int>(logits.lengths.size()) == B,
            "greedy_decode: " << logits.lengths.size() << " lengths for a batch of " << B);
  std::vector<std::vector<int>> hyps(B);
  for (int b = 0; b < B; ++b) {
    greedy_decode_utterance(logits.data.data(), T, B, K, b, logits.lengths[b], &hyps[b]);
  }
  return hyps;
}

}  // namespace ds2
