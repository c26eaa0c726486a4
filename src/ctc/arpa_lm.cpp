#include "ctc/arpa_lm.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/parse_number.h"

namespace ds2 {
namespace {

std::string trim(const std::string& s) {
  const char* space = " \t\r\n";
  const size_t begin = s.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(space) - begin + 1);
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::istringstream in(line);
  std::string field;
  while (in >> field) fields.push_back(field);
  return fields;
}

// "\3-grams:" -> 3; 0 when the line is not a section header of that form.
int section_order(const std::string& line) {
  if (line.size() < 9 || line[0] != '\\' || line.compare(line.size() - 7, 7, "-grams:") != 0)
    return 0;
  int64_t n = 0;
  if (!parse_int64(line.substr(1, line.size() - 8), &n) || n < 1 || n > 1000) return 0;
  return static_cast<int>(n);
}

}  // namespace

size_t ArpaLm::KeyHash::operator()(const Key& k) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(k.n);
  for (int i = 0; i < k.n; ++i) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(k.w[i])) + 0x9e3779b97f4a7c15ull + (h << 6) +
         (h >> 2);
  }
  return static_cast<size_t>(h);
}

ArpaLm ArpaLm::load(const std::string& path) {
  std::ifstream in(path);
  DS2_CHECK(in, path << ": cannot open language model file");
  return parse(in, path);
}

ArpaLm ArpaLm::parse(std::istream& in, const std::string& source) {
  ArpaLm lm;
  std::string raw, line;
  int line_no = 0;
  auto next_line = [&]() -> bool {
    if (!std::getline(in, raw)) return false;
    ++line_no;
    line = trim(raw);
    return true;
  };
  auto where = [&]() { return source + ":" + std::to_string(line_no) + ": "; };

  // Anything before \data\ is a comment.
  bool found_data = false;
  while (next_line()) {
    if (line == "\\data\\") {
      found_data = true;
      break;
    }
  }
  DS2_CHECK(found_data, source << ": not an ARPA file: no \\data\\ line");

  // Header: "ngram N=COUNT" for N = 1, 2, ... until the first section.
  bool have_line = false;
  while (next_line()) {
    if (line.empty()) continue;
    if (line[0] == '\\') {
      have_line = true;
      break;
    }
    const size_t eq = line.find('=');
    int64_t n = 0, count = 0;
    DS2_CHECK(line.rfind("ngram ", 0) == 0 && eq != std::string::npos &&
                  parse_int64(trim(line.substr(6, eq - 6)), &n) &&
                  parse_int64(trim(line.substr(eq + 1)), &count),
              where() << "expected 'ngram N=COUNT' in the \\data\\ header, got '" << line << "'");
    DS2_CHECK(n == lm.order_ + 1, where() << "expected the count of " << lm.order_ + 1
                                          << "-grams, got 'ngram " << n << "='");
    DS2_CHECK(n <= kMaxOrder,
              where() << "order " << n << " is above the supported maximum of " << kMaxOrder);
    DS2_CHECK(count >= 0, where() << "negative n-gram count " << count);
    DS2_CHECK(count < (int64_t{1} << 31), where() << "n-gram count " << count << " is too large");
    lm.counts_.push_back(count);
    lm.order_ = static_cast<int>(n);
  }
  DS2_CHECK(lm.order_ >= 1, where() << "the \\data\\ header lists no 'ngram N=COUNT' line");
  DS2_CHECK(lm.counts_[0] >= 1, where() << "the \\data\\ header announces no 1-grams");
  DS2_CHECK(have_line, source << ": ends after the \\data\\ header (no \\1-grams: section)");

  int64_t total = 0;
  for (int64_t c : lm.counts_) total += c;
  lm.entries_.reserve(static_cast<size_t>(total));
  lm.states_.push_back(Key{});  // state 0: the empty context

  for (int n = 1; n <= lm.order_; ++n) {
    // `line` holds the section header here.
    const int got = section_order(line);
    DS2_CHECK(got == n, where() << "expected \\" << n << "-grams: (the header announces order "
                                << lm.order_ << "), got '" << line << "'");
    int64_t entries = 0;
    have_line = false;
    while (next_line()) {
      if (line.empty()) continue;
      if (line[0] == '\\') {
        have_line = true;
        break;
      }
      const std::vector<std::string> fields = split_fields(line);
      const int nf = static_cast<int>(fields.size());
      const bool with_backoff = nf == n + 2;
      DS2_CHECK(nf == n + 1 || with_backoff,
                where() << "a " << n << "-gram line needs a log10 probability, " << n
                        << (n == 1 ? " word" : " words")
                        << (n < lm.order_ ? " and an optional backoff" : "") << ", got " << nf
                        << " fields");
      DS2_CHECK(!(with_backoff && n == lm.order_),
                where() << "a backoff weight on a " << n << "-gram, the highest order");
      ++entries;
      DS2_CHECK(entries <= lm.counts_[n - 1], where() << "more " << n << "-grams than the "
                                                      << lm.counts_[n - 1]
                                                      << " the \\data\\ header announces");
      Entry e;
      double prob = 0, backoff = 0;
      DS2_CHECK(parse_double(fields[0], &prob) && !std::isnan(prob),
                where() << "bad log10 probability '" << fields[0] << "'");
      DS2_CHECK(prob <= 0, where() << "log10 probability " << fields[0] << " is above 0");
      if (with_backoff) {
        DS2_CHECK(parse_double(fields[n + 1], &backoff) && std::isfinite(backoff),
                  where() << "bad log10 backoff weight '" << fields[n + 1] << "'");
      }
      e.log10_prob = static_cast<float>(prob);
      e.log10_backoff = static_cast<float>(backoff);
      Key key;
      key.n = n;
      for (int i = 0; i < n; ++i) {
        const std::string& w = fields[1 + i];
        auto it = lm.ids_.find(w);
        if (n == 1) {
          DS2_CHECK(it == lm.ids_.end(), where() << "word '" << w << "' listed twice");
          key.w[0] = static_cast<int32_t>(lm.words_.size());
          lm.ids_.emplace(w, key.w[0]);
          lm.words_.push_back(w);
        } else {
          DS2_CHECK(it != lm.ids_.end(), where() << "word '" << w << "' is not among the 1-grams");
          key.w[i] = it->second;
        }
      }
      if (n < lm.order_) {
        e.state = static_cast<State>(lm.states_.size());
        lm.states_.push_back(key);
      }
      DS2_CHECK(lm.entries_.emplace(key, e).second, where() << "duplicate " << n << "-gram");
    }
    DS2_CHECK(have_line,
              source << ": ends inside the \\" << n << "-grams: section (no \\end\\ line)");
    DS2_CHECK(entries == lm.counts_[n - 1],
              where() << "the \\" << n << "-grams: section has " << entries
                      << " entries, the \\data\\ header announces " << lm.counts_[n - 1]);
  }
  DS2_CHECK(line == "\\end\\", where() << "expected \\end\\ after the \\" << lm.order_
                                       << "-grams: section (the header announces order "
                                       << lm.order_ << "), got '" << line << "'");

  auto special = [&](const char* w, bool required) {
    auto it = lm.ids_.find(w);
    DS2_CHECK(it != lm.ids_.end() || !required, source << ": no " << w << " among the 1-grams");
    return it == lm.ids_.end() ? kNoWord : it->second;
  };
  lm.bos_ = special("<s>", true);
  lm.eos_ = special("</s>", true);
  lm.unk_ = special("<unk>", false);
  if (lm.order_ > 1) {
    Key k;
    k.n = 1;
    k.w[0] = lm.bos_;
    lm.begin_state_ = lm.find(k)->state;
  }
  return lm;
}

int ArpaLm::word_id(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? unk_ : it->second;
}

const ArpaLm::Entry* ArpaLm::find(const Key& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<int> ArpaLm::context(State state) const {
  const Key& k = states_.at(state);
  return std::vector<int>(k.w.begin(), k.w.begin() + k.n);
}

ArpaLm::Scored ArpaLm::score(State state, int word) const {
  if (word == kNoWord) return {-std::numeric_limits<double>::infinity(), null_state()};
  DS2_CHECK(word >= 0 && word < vocab_size(),
            "ArpaLm::score: word id " << word << " outside [0, " << vocab_size() << ")");
  DS2_CHECK(state >= 0 && state < static_cast<State>(states_.size()),
            "ArpaLm::score: invalid state " << state);
  const Key& ctx = states_[state];
  const int L = ctx.n;
  Scored result{0, null_state()};
  double backoff = 0;
  Key k;
  // Longest match first: context suffixes of m words, m = L..0. A unigram always matches.
  for (int m = L; m >= 0; --m) {
    k.n = m + 1;
    for (int i = 0; i < m; ++i) k.w[i] = ctx.w[L - m + i];
    k.w[m] = word;
    if (const Entry* e = find(k)) {
      result.log10_prob = e->log10_prob + backoff;
      break;
    }
    // "ctx[L-m..L) word" is unseen: pay that context's backoff weight and shorten it.
    Key c;
    c.n = m;
    for (int i = 0; i < m; ++i) c.w[i] = ctx.w[L - m + i];
    if (const Entry* e = find(c)) backoff += e->log10_backoff;
  }
  // The next context: the longest suffix of "context word" (at most order-1 words) that the
  // model has as an n-gram.
  Key h;
  const int H = std::min(L + 1, order_ - 1);
  for (int len = H; len >= 1; --len) {
    h.n = len;
    for (int i = 0; i < len - 1; ++i) h.w[i] = ctx.w[L - (len - 1) + i];
    h.w[len - 1] = word;
    const Entry* e = find(h);
    if (e && e->state >= 0) {
      result.next = e->state;
      break;
    }
  }
  return result;
}

}  // namespace ds2
