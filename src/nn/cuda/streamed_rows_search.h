// The search both persistent plans (clipped ReLU: nn/cuda/persistent_rnn.h, GRU:
// nn/cuda/persistent_gru.h) run for a layer past what registers and shared memory hold: the most
// row groups in registers first, then the fewest streamed from L2 every step that leave the rest
// within shared memory. Each plan judges a candidate with its own kernels; the order is shared so
// that the two cannot drift apart.
//
//   bool fits = search_streamed_rows(max_register_groups, groups, min_streamed,
//                                    [&](int in_registers, int streamed) {
//                                      ... set the tiling, ask the kernel ...
//                                      return StreamedCandidate::kFits;
//                                    });
#pragma once

#include <algorithm>

namespace ds2 {

enum class StreamedCandidate {
  kFits,             // take it: the search ends
  kMoreStreamed,     // try the next count of streamed groups (e.g. over shared memory, too few SMs)
  kFewerInRegisters  // no count of streamed groups helps at these register groups (no kernel, or
                     // it spills): try one register group fewer
};

// Tries (in_registers, streamed) from max_register_groups down to 0 register groups and, for
// each, from max(1, min_streamed) streamed groups up while in_registers + streamed <= groups;
// returns whether `judge` took one (the tiling is then as `judge` left it).
template <class Judge>
bool search_streamed_rows(int max_register_groups, int groups, int min_streamed, Judge&& judge) {
  for (int nrg = max_register_groups; nrg >= 0; --nrg)
    for (int sg = std::max(1, min_streamed); nrg + sg <= groups; ++sg) {
      const StreamedCandidate c = judge(nrg, sg);
      if (c == StreamedCandidate::kFits) return true;
      if (c == StreamedCandidate::kFewerInRegisters) break;
    }
  return false;
}

}  // namespace ds2
