#include "train/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ds2 {

namespace {

constexpr int kBarCells = 20;
constexpr const char* kEraseLine = "\r\x1b[K";  // to column 0, clear to the end of the line

std::string printf_string(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "--:--";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  char buf[64];
  if (h > 0)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(h),
                  static_cast<long long>(m), static_cast<long long>(s));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(m),
                  static_cast<long long>(s));
  return buf;
}

std::string format_progress(const ProgressState& s, int width) {
  const std::string head = "step " + std::to_string(s.step) + "/" + std::to_string(s.total_steps);
  const double fraction =
      s.total_steps > 0 ? std::clamp(static_cast<double>(s.step) / s.total_steps, 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(fraction * kBarCells);
  const std::string bar = " [" + std::string(filled, '#') + std::string(kBarCells - filled, '-') +
                          "] " + printf_string("%3.0f", std::floor(100 * fraction)) + "%";
  const std::string tail =
      " epoch " + std::to_string(s.epoch) + " loss " + printf_string("%.3f", s.loss) + " utt/s " +
      printf_string("%.1f", s.utt_per_s) + " audio-s/s " + printf_string("%.1f", s.audio_s_per_s) +
      " ETA " + format_duration(s.eta_s);
  const size_t room = static_cast<size_t>(std::max(1, width - 1));
  const std::string full = head + bar + tail;
  if (full.size() <= room) return full;
  return (head + tail).substr(0, room);
}

bool ProgressLine::stdout_is_terminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0);
}

ProgressLine::ProgressLine(std::ostream& out, bool enabled, int width, double min_redraw_s)
    : out_(out), enabled_(enabled), width_(width), min_redraw_s_(min_redraw_s) {}

ProgressLine::~ProgressLine() {
  if (shown_) out_ << '\n' << std::flush;
}

int ProgressLine::width() const {
  if (width_ > 0) return width_;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void ProgressLine::update(const ProgressState& s) {
  if (!enabled_) return;
  state_ = s;
  have_state_ = true;
  const auto now = std::chrono::steady_clock::now();
  const bool last = s.total_steps > 0 && s.step >= s.total_steps;
  if (!shown_ || last || std::chrono::duration<double>(now - last_draw_).count() >= min_redraw_s_)
    draw();
}

void ProgressLine::print(const std::string& line) {
  if (!enabled_) {
    out_ << line << std::endl;
    return;
  }
  clear();
  out_ << line << '\n';
  if (have_state_) draw();
  out_ << std::flush;
}

void ProgressLine::finish() {
  clear();
  have_state_ = false;
  out_ << std::flush;
}

void ProgressLine::draw() {
  out_ << kEraseLine << format_progress(state_, width()) << std::flush;
  shown_ = true;
  last_draw_ = std::chrono::steady_clock::now();
}

void ProgressLine::clear() {
  if (shown_) out_ << kEraseLine;
  shown_ = false;
}

}  // namespace ds2
