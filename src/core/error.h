// Errors: library code throws ds2::Error; the CLI turns it into a one-line message and exit code.
//
//   DS2_CHECK(rate > 0, "audio.sample_rate must be positive, got " << rate);
//   throw ds2::Error("manifest.jsonl:12: missing key 'text'");
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ds2 {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ds2

// Throws ds2::Error with a streamed message when `cond` is false.
#define DS2_CHECK(cond, msg)                       \
  do {                                             \
    if (!(cond)) {                                 \
      std::ostringstream ds2_check_stream_;        \
      ds2_check_stream_ << msg;                    \
      throw ::ds2::Error(ds2_check_stream_.str()); \
    }                                              \
  } while (0)

#define DS2_FAIL(msg)                            \
  do {                                           \
    std::ostringstream ds2_check_stream_;        \
    ds2_check_stream_ << msg;                    \
    throw ::ds2::Error(ds2_check_stream_.str()); \
  } while (0)
