#include "train/step_engine.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>

#include "core/error.h"

namespace ds2 {
namespace {

// Both engines read a dropout layer's next seed through checkpoint_dropout_seed.
TEST(StepEngine, CheckpointDropoutSeedReadsEitherFormatAndNamesABadKey) {
  Checkpoint ck;
  ck.path = "runs/x/step-10.ckpt";
  set_checkpoint_dropout_seed(&ck, "rnn0.dropout", 18446744073709551615ull);
  EXPECT_EQ(ck.meta("train.dropout.rnn0.dropout"), "18446744073709551615");  // what both write
  EXPECT_EQ(checkpoint_dropout_seed(ck, "rnn0.dropout"), 18446744073709551615ull);

  // An older CPU build's std::mt19937_64 state: a seed derived from it, the same every time.
  std::mt19937_64 legacy(5);
  std::ostringstream text;
  text << legacy;
  ck.metadata["train.dropout.rnn1.dropout"] = text.str();
  EXPECT_EQ(checkpoint_dropout_seed(ck, "rnn1.dropout"), legacy());

  ck.metadata["train.dropout.rnn2.dropout"] = "12x";
  try {
    checkpoint_dropout_seed(ck, "rnn2.dropout");
    ADD_FAILURE() << "no error for a bad state";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("runs/x/step-10.ckpt: metadata 'train.dropout.rnn2.dropout' "
                                   "is not a valid state"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ds2
