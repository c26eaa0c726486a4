#include "ctc/error_rate.h"

#include <algorithm>
#include <limits>
#include <map>

namespace ds2 {
namespace {

// sclite's default alignment weights.
constexpr int kSubstitutionCost = 4;
constexpr int kInsertionCost = 3;
constexpr int kDeletionCost = 3;

enum Move : uint8_t { kDiagonal, kDeletion, kInsertion };

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// UTF-8 continuation bytes look like 10xxxxxx; everything else starts a code point.
bool starts_code_point(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
}

}  // namespace

void ErrorCounts::add(const ErrorCounts& other) {
  substitutions += other.substitutions;
  deletions += other.deletions;
  insertions += other.insertions;
  correct += other.correct;
  reference_length += other.reference_length;
}

double ErrorCounts::rate() const {
  if (reference_length == 0) {
    return insertions == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  }
  return static_cast<double>(errors()) / static_cast<double>(reference_length);
}

namespace {

// The moves of the minimum-cost alignment, from the last tokens back to the first.
std::vector<Move> trace_alignment(const std::vector<std::string>& ref,
                                  const std::vector<std::string>& hyp) {
  const size_t n = ref.size(), m = hyp.size();
  const size_t width = m + 1;
  std::vector<int64_t> cost((n + 1) * width);
  std::vector<uint8_t> move((n + 1) * width);
  for (size_t j = 1; j <= m; ++j) {
    cost[j] = cost[j - 1] + kInsertionCost;
    move[j] = kInsertion;
  }
  for (size_t i = 1; i <= n; ++i) {
    cost[i * width] = cost[(i - 1) * width] + kDeletionCost;
    move[i * width] = kDeletion;
    for (size_t j = 1; j <= m; ++j) {
      const int64_t diagonal =
          cost[(i - 1) * width + j - 1] + (ref[i - 1] == hyp[j - 1] ? 0 : kSubstitutionCost);
      const int64_t deletion = cost[(i - 1) * width + j] + kDeletionCost;
      const int64_t insertion = cost[i * width + j - 1] + kInsertionCost;
      size_t cell = i * width + j;
      if (diagonal <= deletion && diagonal <= insertion) {
        cost[cell] = diagonal;
        move[cell] = kDiagonal;
      } else if (deletion < insertion) {
        cost[cell] = deletion;
        move[cell] = kDeletion;
      } else {
        cost[cell] = insertion;
        move[cell] = kInsertion;
      }
    }
  }
  std::vector<Move> moves;
  size_t i = n, j = m;
  while (i > 0 || j > 0) {
    const Move step = static_cast<Move>(move[i * width + j]);
    moves.push_back(step);
    if (step != kInsertion) --i;
    if (step != kDeletion) --j;
  }
  return moves;
}

}  // namespace

ErrorCounts align_tokens(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  ErrorCounts counts;
  counts.reference_length = static_cast<int64_t>(ref.size());
  size_t i = ref.size(), j = hyp.size();
  for (Move step : trace_alignment(ref, hyp)) {
    switch (step) {
      case kDiagonal:
        --i;
        --j;
        if (ref[i] == hyp[j]) {
          ++counts.correct;
        } else {
          ++counts.substitutions;
        }
        break;
      case kDeletion:
        ++counts.deletions;
        --i;
        break;
      case kInsertion:
        ++counts.insertions;
        --j;
        break;
    }
  }
  return counts;
}

std::vector<AlignedToken> aligned_tokens(const std::vector<std::string>& ref,
                                         const std::vector<std::string>& hyp) {
  const std::vector<Move> moves = trace_alignment(ref, hyp);
  std::vector<AlignedToken> out(moves.size());
  size_t i = ref.size(), j = hyp.size(), k = moves.size();
  for (Move step : moves) {
    AlignedToken& t = out[--k];
    if (step != kInsertion) t.ref = ref[--i];
    if (step != kDeletion) t.hyp = hyp[--j];
  }
  return out;
}

std::vector<Confusion> word_confusions(
    const std::vector<std::pair<std::string, std::string>>& ref_hyp) {
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  for (const auto& [ref, hyp] : ref_hyp) {
    for (const AlignedToken& t : aligned_tokens(split_words(ref), split_words(hyp))) {
      if (!t.ref.empty() && !t.hyp.empty() && t.ref != t.hyp) ++counts[{t.ref, t.hyp}];
    }
  }
  std::vector<Confusion> out;
  for (const auto& [pair, count] : counts) out.push_back({pair.first, pair.second, count});
  // Most frequent first; the map's order (reference, then hypothesis word) breaks ties.
  std::stable_sort(out.begin(), out.end(),
                   [](const Confusion& a, const Confusion& b) { return a.count > b.count; });
  return out;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t begin = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > begin) words.emplace_back(text, begin, i - begin);
  }
  return words;
}

std::vector<std::string> split_characters(const std::string& text) {
  std::vector<std::string> chars;
  bool pending_space = false;
  for (size_t i = 0; i < text.size();) {
    if (is_space(text[i])) {
      pending_space = !chars.empty();  // leading whitespace is trimmed
      ++i;
      continue;
    }
    if (pending_space) chars.emplace_back(" ");
    pending_space = false;
    size_t end = i + 1;
    while (end < text.size() && !starts_code_point(text[end])) ++end;
    chars.emplace_back(text, i, end - i);
    i = end;
  }
  return chars;
}

ErrorCounts word_errors(const std::string& ref, const std::string& hyp) {
  return align_tokens(split_words(ref), split_words(hyp));
}

ErrorCounts char_errors(const std::string& ref, const std::string& hyp) {
  return align_tokens(split_characters(ref), split_characters(hyp));
}

}  // namespace ds2
