#include "data/alphabet.h"

#include <fstream>

#include "core/error.h"

namespace ds2 {
namespace {

constexpr const char* kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD, stands for invalid bytes

// Length in bytes of the valid UTF-8 character starting at s[pos], or 0 when the bytes there do
// not form one (stray continuation byte, truncated or overlong sequence, surrogate).
size_t utf8_char_length(const std::string& s, size_t pos, char32_t* code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  size_t length;
  char32_t value;
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2;
    value = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    value = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    value = lead & 0x07;
  } else {
    return 0;
  }
  if (pos + length > s.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(pos + i) & 0x3F);
  }
  static constexpr char32_t kSmallestOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < kSmallestOfLength[length] || value > 0x10FFFF) return 0;
  if (value >= 0xD800 && value <= 0xDFFF) return 0;
  *code_point = value;
  return length;
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Parses one line of an alphabet file into a symbol; `where` is "PATH:LINE" for errors.
std::string symbol_from_line(const std::string& line, const std::string& where) {
  if (line == "<space>" || line == " ") return " ";
  if (line == "\\#") return "#";
  DS2_CHECK(!line.empty(), where << ": empty line (write <space> for the space symbol)");
  DS2_CHECK(line != "<blank>",
            where << ": the CTC blank is implicit (class 0); remove '<blank>' from the alphabet");
  char32_t cp;
  const size_t length = utf8_char_length(line, 0, &cp);
  DS2_CHECK(length != 0, where << ": invalid UTF-8");
  DS2_CHECK(length == line.size(),
            where << ": expected one character per line, got '" << line << "'");
  return line;
}

const char* const kDigitWords[] = {"zero", "one", "two",   "three", "four",
                                   "five", "six", "seven", "eight", "nine"};

enum class CharRole { kKeep, kSpace, kDrop };

// What normalize_text does with a character other than A-Z and 0-9; *replacement is set for
// kKeep characters that change (typographic apostrophes, uppercase Latin-1).
CharRole role_of(char32_t cp, char32_t* replacement) {
  *replacement = cp;
  if (cp < 0x80) {
    if (cp == '\'') return CharRole::kKeep;
    if (cp == '-' || cp == '_' || cp == '/') return CharRole::kSpace;
    if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return CharRole::kSpace;
    const bool punctuation = (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') ||
                             (cp >= '[' && cp <= '`') || (cp >= '{' && cp <= '~');
    return punctuation ? CharRole::kDrop : CharRole::kKeep;
  }
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) {  // Latin-1 uppercase letters (0xD7 is '×')
    *replacement = cp + 0x20;
    return CharRole::kKeep;
  }
  switch (cp) {
    case 0x2019:  // right single quotation mark, the usual typographic apostrophe
    case 0x02BC:  // modifier letter apostrophe
      *replacement = '\'';
      return CharRole::kKeep;
    case 0x00A0:  // no-break space
    case 0x2010:  // hyphen
    case 0x2011:  // non-breaking hyphen
    case 0x2012:  // figure dash
    case 0x2013:  // en dash
    case 0x2014:  // em dash
    case 0x2015:  // horizontal bar
      return CharRole::kSpace;
    case 0x00A1:  // inverted exclamation mark
    case 0x00AB:  // left guillemet
    case 0x00BB:  // right guillemet
    case 0x00BF:  // inverted question mark
    case 0x2018:  // left single quotation mark
    case 0x201C:  // left double quotation mark
    case 0x201D:  // right double quotation mark
    case 0x2026:  // ellipsis
      return CharRole::kDrop;
    default:
      return CharRole::kKeep;
  }
}

}  // namespace

Alphabet::Alphabet(std::vector<std::string> symbols) : symbols_(std::move(symbols)) {
  DS2_CHECK(!symbols_.empty(), "an alphabet needs at least one symbol");
  ascii_class_.fill(0);
  for (int i = 0; i < size(); ++i) {
    const std::string& symbol = symbols_[i];
    char32_t cp;
    DS2_CHECK(!symbol.empty() && utf8_char_length(symbol, 0, &cp) == symbol.size(),
              "alphabet symbol " << i + 1 << " ('" << symbol << "') is not one UTF-8 character");
    const int cls = i + 1;
    if (cp < 0x80) {
      DS2_CHECK(ascii_class_[cp] == 0, "alphabet symbol '" << symbol << "' appears twice");
      ascii_class_[cp] = cls;
    } else {
      DS2_CHECK(non_ascii_class_.emplace(symbol, cls).second,
                "alphabet symbol '" << symbol << "' appears twice");
    }
  }
}

Alphabet Alphabet::english() {
  std::vector<std::string> symbols = {" ", "'"};
  for (char c = 'a'; c <= 'z'; ++c) symbols.emplace_back(1, c);
  return Alphabet(std::move(symbols));
}

Alphabet Alphabet::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DS2_CHECK(in, "cannot open alphabet file '" << path << "'");
  std::vector<std::string> symbols;
  std::unordered_map<std::string, int> line_of_symbol;
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(line_number);
    std::string symbol = symbol_from_line(line, where);
    auto [it, inserted] = line_of_symbol.emplace(symbol, line_number);
    DS2_CHECK(inserted, where << ": symbol '" << symbol << "' repeats line " << it->second);
    symbols.push_back(std::move(symbol));
  }
  DS2_CHECK(!symbols.empty(), "alphabet file '" << path << "' has no symbols");
  return Alphabet(std::move(symbols));
}

const std::string& Alphabet::symbol(int cls) const {
  DS2_CHECK(cls >= 1 && cls <= size(),
            "class " << cls << " is not a symbol class (1.." << size() << ")");
  return symbols_[cls - 1];
}

std::vector<int> Alphabet::encode(const std::string& normalized_text,
                                  std::string* bad_chars) const {
  std::vector<int> classes;
  classes.reserve(normalized_text.size());
  std::string unknown;
  for (size_t pos = 0; pos < normalized_text.size();) {
    char32_t cp;
    const size_t length = utf8_char_length(normalized_text, pos, &cp);
    int cls = 0;
    std::string character;
    if (length == 0) {
      character = kReplacementChar;
    } else if (cp < 0x80) {
      cls = ascii_class_[cp];
      character = normalized_text.substr(pos, 1);
    } else {
      character = normalized_text.substr(pos, length);
      auto it = non_ascii_class_.find(character);
      if (it != non_ascii_class_.end()) cls = it->second;
    }
    pos += length == 0 ? 1 : length;
    if (cls != 0) {
      classes.push_back(cls);
    } else if (unknown.find(character) == std::string::npos) {
      unknown += character;
    }
  }
  if (bad_chars != nullptr) {
    *bad_chars = unknown;
  } else {
    DS2_CHECK(unknown.empty(),
              "characters not in the alphabet: '" << unknown << "' in '" << normalized_text << "'");
  }
  return classes;
}

std::string Alphabet::decode(const std::vector<int>& classes) const {
  std::string text;
  for (int cls : classes) {
    DS2_CHECK(cls >= 0 && cls <= size(),
              "class " << cls << " is outside the alphabet's classes 0.." << size());
    if (cls != 0) text += symbols_[cls - 1];
  }
  return text;
}

TextNormalization::Digits parse_digits_policy(const std::string& value) {
  if (value == "spell") return TextNormalization::Digits::kSpell;
  if (value == "keep") return TextNormalization::Digits::kKeep;
  DS2_FAIL("digits policy must be 'spell' or 'keep', got '" << value << "'");
}

std::string normalize_text(const std::string& raw, const TextNormalization& options) {
  std::string out;
  out.reserve(raw.size());
  bool space_pending = false;
  // Writes a space before the next kept character, so runs collapse and ends are trimmed.
  const auto begin_token = [&] {
    if (space_pending && !out.empty()) out += ' ';
    space_pending = false;
  };
  for (size_t pos = 0; pos < raw.size();) {
    char32_t cp;
    const size_t length = utf8_char_length(raw, pos, &cp);
    if (length == 0) {  // invalid byte: keep it so that encode reports it
      begin_token();
      out += raw[pos++];
      continue;
    }
    pos += length;
    if (cp >= 'A' && cp <= 'Z') {
      begin_token();
      out += static_cast<char>(cp - 'A' + 'a');
    } else if (cp >= '0' && cp <= '9') {
      if (options.digits == TextNormalization::Digits::kSpell) {
        space_pending = true;
        begin_token();
        out += kDigitWords[cp - '0'];
        space_pending = true;
      } else {
        begin_token();
        out += static_cast<char>(cp);
      }
    } else {
      char32_t replacement;
      switch (role_of(cp, &replacement)) {
        case CharRole::kKeep:
          begin_token();
          append_utf8(replacement, &out);
          break;
        case CharRole::kSpace:
          space_pending = true;
          break;
        case CharRole::kDrop:
          break;
      }
    }
  }
  return out;
}

}  // namespace ds2
