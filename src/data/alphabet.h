// Alphabet: the output symbols of the acoustic model, and the text normalization that maps raw
// transcripts onto them. CTC's blank is class 0; the symbols are classes 1..size().
//
//   ds2::Alphabet alphabet = ds2::Alphabet::english();      // space, apostrophe, a-z
//   std::string text = ds2::normalize_text("Hello, World! 42", {});  // "hello world four two"
//   std::string bad;
//   std::vector<int> labels = alphabet.encode(text, &bad);  // bad.empty() when all symbols known
//   alphabet.decode(labels) == text;
//
// Alphabet files (from_file) hold one symbol (one UTF-8 character) per line:
//   <space>      the space character (a line holding a single " " works too)
//   # ...        a comment line; write \# for the '#' symbol itself
// Empty lines, repeated symbols, lines of several characters, "<blank>" (the blank is implicit)
// and invalid UTF-8 are errors naming the file and line.
#pragma once

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

namespace ds2 {

class Alphabet {
 public:
  // Each symbol is one UTF-8 character; throws ds2::Error on duplicates or an empty list.
  explicit Alphabet(std::vector<std::string> symbols);

  static Alphabet english();
  static Alphabet from_file(const std::string& path);

  int size() const { return static_cast<int>(symbols_.size()); }  // symbols, excluding blank
  int num_classes() const { return size() + 1; }                  // class 0 is the CTC blank
  // The symbol of class 1..size().
  const std::string& symbol(int cls) const;
  const std::vector<std::string>& symbols() const { return symbols_; }

  // Maps each character of already-normalized text to its class (1..size). Characters not in
  // the alphabet are left out of the result and listed in *bad_chars: each distinct character
  // once, in order of first appearance, with invalid UTF-8 bytes shown as U+FFFD. The caller
  // must reject the utterance when *bad_chars is not empty. With bad_chars == nullptr an unknown
  // character throws ds2::Error instead.
  std::vector<int> encode(const std::string& normalized_text, std::string* bad_chars) const;

  // Concatenates the symbols of `classes`, skipping blanks (class 0). Does not merge repeats:
  // that is the CTC decoder's job. Throws on a class outside [0, size()].
  std::string decode(const std::vector<int>& classes) const;

 private:
  std::vector<std::string> symbols_;
  std::array<int, 128> ascii_class_;                      // 0 when the ASCII char is absent
  std::unordered_map<std::string, int> non_ascii_class_;  // keyed by the UTF-8 bytes
};

// How normalize_text treats digits: spell each one as a word ("42" -> "four two"), or keep it.
struct TextNormalization {
  enum class Digits { kSpell, kKeep };
  Digits digits = Digits::kSpell;
};

// Parses the config spelling of the digits policy: "spell" or "keep".
TextNormalization::Digits parse_digits_policy(const std::string& value);

// Normalizes a raw transcript for an English-style alphabet:
//  - lowercases ASCII and the Latin-1 letters (U+00C0..U+00DE -> U+00E0..U+00FE); accents stay,
//    so an alphabet without them reports them instead of the text silently changing spelling;
//  - keeps apostrophes, and turns the typographic apostrophe U+2019 (and U+02BC) into "'";
//  - turns hyphens, underscores, slashes, Unicode dashes and no-break spaces into spaces;
//  - removes other ASCII punctuation and common Unicode quotes, ellipsis and inverted marks;
//  - spells digits as words digit by digit (Digits::kSpell), or keeps them (Digits::kKeep);
//  - collapses whitespace runs to one space and trims both ends.
// Anything else (other scripts, control characters, invalid UTF-8) passes through unchanged, so
// Alphabet::encode reports it instead of it being dropped.
std::string normalize_text(const std::string& raw, const TextNormalization& options);

}  // namespace ds2
