// Whole-token number parsing for text the project reads (ARPA language models, command-line
// options): the token is the number and nothing else, so "4x", "" or "1 2" are refused where
// strtod or stoi would take a prefix.
//
//   double p;
//   if (!parse_double(token, &p)) throw ...;     // "-2.5", "+1e3", "nan" parse; "4x" does not
//   int64_t n;
//   if (!parse_int64(token, &n)) throw ...;      // "12" parses; "12.0", "" do not
//   uint64_t u;
//   if (!parse_uint64(token, &u)) throw ...;     // up to 18446744073709551615; "-1" does not
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

namespace ds2 {

// The whole token as a double (an optional leading '+', then std::from_chars' general format).
inline bool parse_double(const std::string& token, double* value) {
  const char* begin = token.data();
  const char* end = begin + token.size();
  if (begin != end && *begin == '+') ++begin;
  const auto result = std::from_chars(begin, end, *value);
  return result.ec == std::errc() && result.ptr == end;
}

// The whole token as a decimal integer of type Int (a '-' only where Int is signed; out of
// range is refused).
template <typename Int>
inline bool parse_whole_integer(const std::string& token, Int* value) {
  const char* end = token.data() + token.size();
  const auto result = std::from_chars(token.data(), end, *value);
  return !token.empty() && result.ec == std::errc() && result.ptr == end;
}

inline bool parse_int64(const std::string& token, int64_t* value) {
  return parse_whole_integer(token, value);
}

// No sign at all.
inline bool parse_uint64(const std::string& token, uint64_t* value) {
  return parse_whole_integer(token, value);
}

}  // namespace ds2
