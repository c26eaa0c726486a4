#include "dist/fault_injection.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/error.h"

namespace ds2::dist {

Fault parse_fault(const std::string& text) {
  Fault f;
  const size_t at = text.find('@'), colon = text.find(':');
  const bool shaped = at != std::string::npos && colon != std::string::npos && colon > at + 1 &&
                      colon + 1 < text.size();
  DS2_CHECK(shaped, "DS2_FAULT: '" << text << "' is not KIND@RANK:STEP (e.g. kill@1:3)");
  f.kind = text.substr(0, at);
  DS2_CHECK(f.kind == "kill" || f.kind == "hang" || f.kind == "nan",
            "DS2_FAULT: unknown kind '" << f.kind << "' (kill, hang or nan)");
  // Whole-string integers only: "1x" or "" is not a rank.
  auto integer = [&](const std::string& digits) {
    const bool valid = !digits.empty() && digits.size() <= 9 &&
                       digits.find_first_not_of("0123456789") == std::string::npos;
    DS2_CHECK(valid,
              "DS2_FAULT: '" << text << "' is not KIND@RANK:STEP with integer RANK and STEP");
    return std::stoll(digits);
  };
  f.rank = static_cast<int>(integer(text.substr(at + 1, colon - at - 1)));
  f.step = integer(text.substr(colon + 1));
  return f;
}

bool inject_fault(int rank, int64_t step) {
  static const Fault fault = [] {
    const char* text = std::getenv("DS2_FAULT");
    return text ? parse_fault(text) : Fault{};
  }();
  // Once: a skipped step leaves the step count where it was, and the next batch must run clean.
  static bool done = false;
  if (done || fault.kind.empty() || fault.rank != rank || fault.step != step) return false;
  done = true;
  const char* what = fault.kind == "kill"   ? "dies"
                     : fault.kind == "hang" ? "hangs"
                                            : "poisons its gradients with NaN";
  std::fprintf(stderr, "ds2: DS2_FAULT: rank %d %s at step %lld\n", rank, what,
               static_cast<long long>(step));
  std::fflush(stderr);
  if (fault.kind == "nan") return true;
  if (fault.kind == "kill") std::raise(SIGKILL);
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace ds2::dist
