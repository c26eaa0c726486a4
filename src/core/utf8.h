// UTF-8 checks, and quoting of untrusted text for one-line error messages.
//
//   size_t at = 0;
//   if (!ds2::is_valid_utf8(value, &at)) DS2_FAIL("not valid UTF-8 (byte " << at << ")");
//   DS2_FAIL("unknown key '" << ds2::printable(key) << "'");  // one line, whatever `key` holds
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ds2 {

// True when `text` is well-formed UTF-8 (no stray continuation bytes, truncated or overlong
// sequences, surrogates or code points above U+10FFFF). Otherwise `bad_offset` (when not null)
// receives the offset of the first byte that does not start a valid character.
bool is_valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

// `text` made safe to embed in a one-line message: control characters, DEL, backslashes and bytes
// that are not valid UTF-8 become C-style escapes (\n, \t, \\, \xNN); valid non-ASCII characters
// are kept. Longer than `max_chars` characters: cut, with "..." appended.
std::string printable(std::string_view text, size_t max_chars = 80);

}  // namespace ds2
