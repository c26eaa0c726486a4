#include "train/progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ds2 {
namespace {

const std::string kErase = "\r\x1b[K";

ProgressState state(int64_t step, int64_t total) {
  ProgressState s;
  s.step = step;
  s.total_steps = total;
  s.epoch = 1;
  s.loss = 12.3456;
  s.utt_per_s = 155.04;
  s.audio_s_per_s = 354.26;
  s.eta_s = 312;
  return s;
}

TEST(Progress, DurationsReadAsClockTimes) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(245.4), "4:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--");
}

TEST(Progress, LineShowsStepBarEpochLossSpeedsAndEta) {
  EXPECT_EQ(format_progress(state(120, 3008), 200),
            "step 120/3008 [--------------------]   3% epoch 1 loss 12.346 utt/s 155.0 "
            "audio-s/s 354.3 ETA 5:12");
  EXPECT_EQ(format_progress(state(1504, 3008), 200),
            "step 1504/3008 [##########----------]  50% epoch 1 loss 12.346 utt/s 155.0 "
            "audio-s/s 354.3 ETA 5:12");
  EXPECT_EQ(format_progress(state(3008, 3008), 200).substr(0, 42),
            "step 3008/3008 [####################] 100%");
}

TEST(Progress, NarrowTerminalDropsTheBarThenTruncates) {
  // Without the bar the text fits in one column more than its length (the last stays free).
  const std::string no_bar =
      "step 120/3008 epoch 1 loss 12.346 utt/s 155.0 audio-s/s 354.3 ETA 5:12";
  EXPECT_EQ(format_progress(state(120, 3008), static_cast<int>(no_bar.size()) + 1), no_bar);
  EXPECT_EQ(format_progress(state(120, 3008), 40), no_bar.substr(0, 39));
}

TEST(Progress, PrintedLinesGoAboveTheBarWhichIsRedrawn) {
  std::ostringstream out;
  {
    ProgressLine bar(out, /*enabled=*/true, /*width=*/200, /*min_redraw_s=*/0);
    bar.update(state(120, 3008));
    bar.print("eval step 120 epoch 1: dev WER 3.10%");
    bar.finish();
    bar.print("done");
  }
  const std::string line = format_progress(state(120, 3008), 200);
  EXPECT_EQ(out.str(), kErase + line + kErase + "eval step 120 epoch 1: dev WER 3.10%\n" + kErase +
                           line + kErase + "done\n");
}

TEST(Progress, RedrawsAreRateLimitedExceptTheLastStep) {
  std::ostringstream out;
  ProgressLine bar(out, true, 200, /*min_redraw_s=*/1000);
  bar.update(state(1, 10));
  bar.update(state(2, 10));  // within the interval: not drawn
  bar.update(state(10, 10));
  bar.finish();
  EXPECT_EQ(out.str(), kErase + format_progress(state(1, 10), 200) + kErase +
                           format_progress(state(10, 10), 200) + kErase);
}

TEST(Progress, ABarLeftOnScreenIsEndedWithANewline) {
  std::ostringstream out;
  {
    ProgressLine bar(out, true, 200, 0);
    bar.update(state(5, 10));  // e.g. an exception ends the run here
  }
  EXPECT_EQ(out.str(), kErase + format_progress(state(5, 10), 200) + "\n");
}

TEST(Progress, DisabledItPrintsPlainLinesOnly) {
  std::ostringstream out;
  {
    ProgressLine bar(out, /*enabled=*/false, 200, 0);
    bar.update(state(5, 10));
    bar.print("step 5/10 epoch 0 loss 1.000");
    bar.finish();
  }
  EXPECT_EQ(out.str(), "step 5/10 epoch 0 loss 1.000\n");
}

}  // namespace
}  // namespace ds2
