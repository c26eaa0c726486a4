// Training progress on a terminal: one line rewritten in place with '\r' (step/total, a bar,
// epoch, loss, utterances/s, audio-seconds/s, ETA). Only when stdout is a terminal; on a file, a
// pipe or CI the trainer prints its plain log lines instead, and train.log is the same either way.
//
//   ds2::ProgressLine bar(std::cout, ds2::ProgressLine::stdout_is_terminal());
//   bar.update({step, total_steps, epoch, loss, utt_per_s, audio_s_per_s, eta_s});
//   bar.print("eval step 40 epoch 0: dev WER 3.10%");  // a permanent line; the bar stays below
//   bar.finish();                                       // the bar is erased
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace ds2 {

struct ProgressState {
  int64_t step = 0;
  int64_t total_steps = 0;
  int epoch = 0;
  double loss = 0;
  double utt_per_s = 0;
  double audio_s_per_s = 0;
  double eta_s = -1;  // < 0: unknown
};

// "4:05", "1:02:03"; "--:--" for a negative (unknown) duration.
std::string format_duration(double seconds);
// The bar's text, at most `width - 1` characters (the last column is left free so the terminal
// never wraps); the graphical bar is left out first when the width is short.
std::string format_progress(const ProgressState& s, int width);

class ProgressLine {
 public:
  // True when standard output is a terminal (and TERM is not "dumb").
  static bool stdout_is_terminal();

  // Disabled: update() and finish() do nothing and print() writes the line as it is.
  // width 0: the terminal's width, asked at each redraw. Redraws are at most one per
  // `min_redraw_s`, except the last step's.
  ProgressLine(std::ostream& out, bool enabled, int width = 0, double min_redraw_s = 0.1);
  ~ProgressLine();  // a bar still shown stays on screen, ended with a newline
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  void update(const ProgressState& s);
  void print(const std::string& line);
  void finish();

 private:
  void draw();
  void clear();
  int width() const;
  std::ostream& out_;
  bool enabled_;
  int width_;
  double min_redraw_s_;
  ProgressState state_;
  bool have_state_ = false;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace ds2
