#include "core/utf8.h"

#include <cstdint>
#include <cstdio>

namespace ds2 {
namespace {

// Bytes in the well-formed UTF-8 character at text[pos], or 0 when none starts there.
size_t char_length(std::string_view text, size_t pos) {
  const auto at = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = at(pos);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t cp = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    cp = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    cp = lead & 0x0Fu;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    cp = lead & 0x07u;
  } else {
    return 0;  // continuation byte, or a lead byte that only overlong/out-of-range forms use
  }
  if (text.size() - pos < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((at(pos + i) & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (at(pos + i) & 0x3Fu);
  }
  if (length == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (length == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return length;
}

}  // namespace

bool is_valid_utf8(std::string_view text, size_t* bad_offset) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = char_length(text, pos);
    if (length == 0) {
      if (bad_offset) *bad_offset = pos;
      return false;
    }
    pos += length;
  }
  return true;
}

std::string printable(std::string_view text, size_t max_chars) {
  std::string out;
  size_t chars = 0;
  for (size_t pos = 0; pos < text.size(); ++chars) {
    if (chars == max_chars) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(text[pos]);
    const size_t length = char_length(text, pos);
    if (length > 1) {
      out.append(text.substr(pos, length));
      pos += length;
      continue;
    }
    ++pos;
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (length == 0 || c < 0x20 || c == 0x7F) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace ds2
