// A back-off n-gram language model read from an ARPA file (orders 1 to 5), for shallow fusion
// in the CTC beam search. Words are interned to ids in the order of the \1-grams: section;
// probabilities are log10, as in the file.
//
//   ds2::ArpaLm lm = ds2::ArpaLm::load("data/fsdd/digits-3gram.arpa");
//   ds2::ArpaLm::State s = lm.begin_state();              // the context "<s>"
//   double total = 0;
//   for (const char* w : {"three", "one", "four"}) {
//     ds2::ArpaLm::Scored r = lm.score(s, lm.word_id(w));  // log10 P(w | context), backed off
//     total += r.log10_prob;
//     s = r.next;
//   }
//   total += lm.end_score(s);                              // log10 P(</s> | context)
//
// The format: optional text before "\data\", then "ngram N=COUNT" lines for N = 1..order, then
// one "\N-grams:" section per order holding exactly COUNT lines "log10_prob w1 .. wN
// [log10_backoff]" (the backoff only below the highest order), then "\end\". Malformed input
// throws ds2::Error naming file:line and the reason (bad number, wrong word count, count that
// disagrees with its section, duplicate n-gram, word missing from the 1-grams, ...).
#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <string>
#include <unordered_map>
#include <vector>

namespace ds2 {

class ArpaLm {
 public:
  static constexpr int kMaxOrder = 5;
  static constexpr int kNoWord = -1;  // word_id() of an unknown word when there is no <unk>

  // A scoring context: the longest suffix of the history that the model has as an n-gram (at
  // most order-1 words). Cheap to copy; only meaningful for the model that made it.
  using State = int32_t;

  struct Scored {
    double log10_prob;  // log10 P(word | state's context), backoff weights included
    State next;         // context after `word`
  };

  // Reads an ARPA file; throws ds2::Error "PATH:LINE: reason" on malformed input.
  static ArpaLm load(const std::string& path);
  // Same from a stream; `source` names it in errors.
  static ArpaLm parse(std::istream& in, const std::string& source);

  int order() const { return order_; }
  int vocab_size() const { return static_cast<int>(words_.size()); }
  // Number of n-grams of order n (1..order()) as given in the header.
  int64_t count(int n) const { return counts_.at(n - 1); }

  // The id of `word`; an unknown word maps to unk_id() (kNoWord when the model has no <unk>).
  int word_id(const std::string& word) const;
  const std::string& word(int id) const { return words_.at(id); }
  bool has_word(const std::string& word) const { return ids_.count(word) > 0; }
  int bos_id() const { return bos_; }
  int eos_id() const { return eos_; }
  int unk_id() const { return unk_; }

  // The context at the start of a sentence ("<s>").
  State begin_state() const { return begin_state_; }
  // The empty context (unigram probabilities).
  State null_state() const { return 0; }
  // log10 P(word | state) with Katz-style backoff: the longest matching n-gram's probability
  // plus the backoff weights of the longer contexts that did not match. `word` must be a valid
  // id; kNoWord scores as a word the model never saw: log10 P = -inf, next = null_state().
  Scored score(State state, int word) const;
  // log10 P(</s> | state).
  double end_score(State state) const { return score(state, eos_).log10_prob; }
  // The words of a state's context, oldest first (for tests and debugging).
  std::vector<int> context(State state) const;

 private:
  struct Key {
    std::array<int32_t, kMaxOrder> w{};
    int32_t n = 0;
    bool operator==(const Key& o) const {
      if (n != o.n) return false;
      for (int i = 0; i < n; ++i)
        if (w[i] != o.w[i]) return false;
      return true;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    float log10_prob = 0;
    float log10_backoff = 0;
    State state = -1;  // the context id of this n-gram (orders below the highest), else -1
  };

  const Entry* find(const Key& key) const;

  int order_ = 0;
  std::vector<int64_t> counts_;
  std::vector<std::string> words_;
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
  std::vector<Key> states_;  // state id -> its context words (states_[0] is empty)
  int bos_ = kNoWord, eos_ = kNoWord, unk_ = kNoWord;
  State begin_state_ = 0;
};

}  // namespace ds2
