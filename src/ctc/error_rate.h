// Word and character error rates scored the way NIST sclite scores them: a minimum-cost
// alignment with sclite's default weights (correct 0, substitution 4, insertion 3, deletion 3)
// and sclite's tie-breaking, so the substitution/deletion/insertion split matches its reports.
//
//   ds2::ErrorCounts wer, cer;
//   for (const auto& [ref, hyp] : pairs) {
//     wer.add(ds2::word_errors(ref, hyp));
//     cer.add(ds2::char_errors(ref, hyp));
//   }
//   printf("WER %.2f%% (S=%lld D=%lld I=%lld)\n", 100 * wer.rate(), ...);
//
// Average over a corpus by adding counts and calling rate() once (sclite's "Err" column), not by
// averaging per-utterance rates. Which words a model confuses (`ds2 eval --confusions N`):
//
//   for (const auto& c : ds2::word_confusions(pairs)) printf("%s -> %s %lld\n", ...);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ds2 {

struct ErrorCounts {
  int64_t substitutions = 0;
  int64_t deletions = 0;
  int64_t insertions = 0;
  int64_t correct = 0;
  int64_t reference_length = 0;  // N = correct + substitutions + deletions

  void add(const ErrorCounts& other);
  int64_t errors() const { return substitutions + deletions + insertions; }
  // (S + D + I) / N. With an empty reference: 0 when nothing was inserted, +infinity otherwise
  // (any output is infinitely wrong relative to nothing; corpus totals never hit this case).
  double rate() const;
};

// Aligns hypothesis tokens to reference tokens and counts the edits. Among alignments of equal
// cost, each cell prefers a match/substitution, then a deletion, then an insertion, tracing back
// from the end of both sequences, as sclite does.
ErrorCounts align_tokens(const std::vector<std::string>& ref, const std::vector<std::string>& hyp);

// One position of that alignment: a reference token and the hypothesis token aligned with it;
// `ref` is empty for an insertion and `hyp` for a deletion.
struct AlignedToken {
  std::string ref;
  std::string hyp;
};
// The alignment align_tokens counts, first tokens first.
std::vector<AlignedToken> aligned_tokens(const std::vector<std::string>& ref,
                                         const std::vector<std::string>& hyp);

// Word substitutions over a corpus of (reference, hypothesis) texts, sclite's confusion pairs:
// reference word `ref` recognized as `hyp`, `count` times. Most frequent first, ties in
// (ref, hyp) order.
struct Confusion {
  std::string ref;
  std::string hyp;
  int64_t count = 0;
};
std::vector<Confusion> word_confusions(
    const std::vector<std::pair<std::string, std::string>>& ref_hyp);

// Words: tokens separated by runs of ASCII whitespace.
std::vector<std::string> split_words(const std::string& text);
// Characters: one token per UTF-8 code point, with the text trimmed and every run of ASCII
// whitespace collapsed into a single " " token, so word boundaries count as characters (a merged
// or split word costs one edit) but spacing differences do not.
std::vector<std::string> split_characters(const std::string& text);

ErrorCounts word_errors(const std::string& ref, const std::string& hyp);
ErrorCounts char_errors(const std::string& ref, const std::string& hyp);

}  // namespace ds2
