// The tagged exchange's protocol (kernels/exchange_tags.h), on the host: a reader must tell its
// step from the one two before in the same place, through the 16-bit wrap, and the fill a launch
// gives the exchange must pass for neither of the first two steps (the first words written to each
// parity). The kernels' own results are checked on a GPU (tests/nn/cuda/persistent_rnn_test.cpp).
#include "kernels/exchange_tags.h"

#include <gtest/gtest.h>

#include <cstring>

namespace ds2::kernels {
namespace {

TEST(ExchangeTags, AReaderTellsItsStepFromTheOneTwoBefore) {
  int collisions = 0;
  for (int s = 2; s < 3 * 65536; ++s) {  // three wraps of the 16-bit tag
    collisions += step_tag(s) == step_tag(s - 2);
    collisions += fp32_step_tag(s) == fp32_step_tag(s - 2);
    collisions += half_split_step_tag(s) == half_split_step_tag(s - 2);
  }
  EXPECT_EQ(collisions, 0);
  EXPECT_EQ(step_tag(65534), 65535u);
  EXPECT_EQ(step_tag(65535), 0u);  // wrapped: its place then holds step 65533's tag, not the fill
}

TEST(ExchangeTags, TheLaunchFillPassesForNeitherFirstStep) {
  uint32_t bf16_word = 0, fp32_word = 0;
  std::memset(&bf16_word, kTaggedWordFillByte, sizeof bf16_word);
  std::memset(&fp32_word, kTaggedFp32FillByte, sizeof fp32_word);
  for (int s : {0, 1}) {
    EXPECT_NE(bf16_word & 0xffffu, step_tag(s)) << "step " << s;  // the tag is the low half
    EXPECT_NE(fp32_word & 1u, fp32_step_tag(s)) << "step " << s;  // the tag is the lowest bit
    // fp16 split halves: the zero fill, the tag in each half's lowest bit
    EXPECT_NE(bf16_word & 1u, half_split_step_tag(s)) << "step " << s;
    EXPECT_NE(bf16_word >> 16 & 1u, half_split_step_tag(s)) << "step " << s;
  }
}

}  // namespace
}  // namespace ds2::kernels
