#include "ctc/prefix_beam_search.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "core/error.h"

namespace ds2 {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
const double kLn10 = std::log(10.0);

double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double hi = std::max(a, b);
  return hi + std::log1p(std::exp(std::min(a, b) - hi));
}

// A prefix is a node of the tree of label sequences; node 0 is the empty prefix.
struct Node {
  int parent = -1;
  int label = 0;                // last label (0 for the root)
  ArpaLm::State lm_state = 0;   // LM context after the prefix's completed words
  double lm = 0;                // fused LM terms of the completed words
  double blank = kNegInf;       // ln P(alignments of the prefix ending in blank)
  double label_end = kNegInf;   // ln P(alignments ending in the last label)
  double next_blank = kNegInf;  // the same for the frame being computed
  double next_label_end = kNegInf;
  int frame = -1;  // the frame whose next_* this node holds
  double total() const { return log_add(blank, label_end); }
};

// The state of one decode() call.
class Search {
 public:
  Search(const BeamSearchOptions& options, const ArpaLm* lm,
         const std::vector<std::string>& symbols, int num_classes)
      : opt_(options), lm_(lm), symbols_(symbols), num_classes_(num_classes) {
    Node root;
    root.blank = 0;
    if (lm_) root.lm_state = lm_->begin_state();
    nodes_.push_back(root);
    beam_.push_back(0);
  }

  void step(const float* x, int frame) {
    log_softmax(x);
    select_labels();
    touched_.clear();
    for (const int id : beam_) {
      const double blank = nodes_[id].blank, label_end = nodes_[id].label_end;
      const double total = log_add(blank, label_end);
      const int last = nodes_[id].label;
      touch(id, frame);
      nodes_[id].next_blank = log_add(nodes_[id].next_blank, total + logp_[0]);
      for (const int c : labels_) {
        double extend = total + logp_[c];
        if (c == last) {
          // The same label again without a blank between collapses into this prefix; only a
          // path ending in blank starts a new occurrence of it.
          nodes_[id].next_label_end = log_add(nodes_[id].next_label_end, label_end + logp_[c]);
          extend = blank + logp_[c];
        }
        if (extend == kNegInf) continue;  // an impossible prefix (e.g. "a a" after one frame)
        const int child = child_of(id, c);
        touch(child, frame);
        nodes_[child].next_label_end = log_add(nodes_[child].next_label_end, extend);
      }
    }
    for (const int id : touched_) {
      nodes_[id].blank = nodes_[id].next_blank;
      nodes_[id].label_end = nodes_[id].next_label_end;
    }
    // Keep the best beam_width; equal scores keep the earlier-created node (deterministic).
    const size_t keep = std::min(touched_.size(), static_cast<size_t>(opt_.beam_width));
    std::partial_sort(touched_.begin(), touched_.begin() + keep, touched_.end(), [&](int a, int b) {
      return ranks_before(rank_score(a), a, rank_score(b), b);
    });
    beam_.assign(touched_.begin(), touched_.begin() + keep);
    if (nodes_.size() >= next_compaction_) compact();
  }

  std::vector<BeamHypothesis> finish() {
    std::vector<std::pair<BeamHypothesis, int>> out;
    for (const int id : beam_) {
      BeamHypothesis h;
      h.acoustic = nodes_[id].total();
      h.lm = nodes_[id].lm;
      if (lm_) {
        ArpaLm::State state = nodes_[id].lm_state;
        if (nodes_[id].label != opt_.space_label) h.lm += complete_word(id, &state);
        if (opt_.lm_weight != 0) h.lm += opt_.lm_weight * kLn10 * lm_->end_score(state);
      }
      h.score = h.acoustic + h.lm;
      for (int n = id; n != 0; n = nodes_[n].parent) h.labels.push_back(nodes_[n].label);
      std::reverse(h.labels.begin(), h.labels.end());
      out.emplace_back(std::move(h), id);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return ranks_before(a.first.score, a.second, b.first.score, b.second);
    });
    std::vector<BeamHypothesis> result;
    for (auto& p : out) result.push_back(std::move(p.first));
    return result;
  }

 private:
  static bool ranks_before(double score_a, int id_a, double score_b, int id_b) {
    if (score_a != score_b) return score_a > score_b;
    return id_a < id_b;
  }

  double rank_score(int id) const { return nodes_[id].total() + nodes_[id].lm; }

  // Drops the nodes that are neither in the beam nor an ancestor of one, so memory follows the
  // beam rather than the utterance length. Ids are renumbered in their old order, so ranking
  // ties still go to the earlier-created prefix.
  void compact() {
    std::vector<char> keep(nodes_.size(), 0);
    keep[0] = 1;
    for (const int id : beam_)
      for (int n = id; !keep[n]; n = nodes_[n].parent) keep[n] = 1;
    std::vector<int> new_id(nodes_.size(), -1);
    std::vector<Node> kept;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!keep[i]) continue;
      new_id[i] = static_cast<int>(kept.size());
      kept.push_back(nodes_[i]);
    }
    children_.clear();
    for (size_t i = 1; i < kept.size(); ++i) {
      kept[i].parent = new_id[kept[i].parent];  // parents precede their children
      children_.emplace(child_key(kept[i].parent, kept[i].label), static_cast<int>(i));
    }
    for (int& id : beam_) id = new_id[id];
    nodes_.swap(kept);
    next_compaction_ = std::max(kMinCompaction, 4 * nodes_.size());
  }

  int64_t child_key(int parent, int label) const {
    return static_cast<int64_t>(parent) * num_classes_ + label;
  }

  void log_softmax(const float* x) {
    logp_.resize(num_classes_);
    double hi = x[0];
    for (int k = 1; k < num_classes_; ++k) hi = std::max(hi, static_cast<double>(x[k]));
    double sum = 0;
    for (int k = 0; k < num_classes_; ++k) sum += std::exp(x[k] - hi);
    const double log_z = hi + std::log(sum);
    for (int k = 0; k < num_classes_; ++k) logp_[k] = x[k] - log_z;
  }

  // The labels tried at this frame, in increasing class order.
  void select_labels() {
    labels_.clear();
    for (int k = 1; k < num_classes_; ++k)
      if (logp_[k] >= opt_.prune_log_prob) labels_.push_back(k);
    if (opt_.top_k > 0 && labels_.size() > static_cast<size_t>(opt_.top_k)) {
      std::partial_sort(
          labels_.begin(), labels_.begin() + opt_.top_k, labels_.end(),
          [&](int a, int b) { return logp_[a] != logp_[b] ? logp_[a] > logp_[b] : a < b; });
      labels_.resize(opt_.top_k);
      std::sort(labels_.begin(), labels_.end());
    }
  }

  void touch(int id, int frame) {
    Node& n = nodes_[id];
    if (n.frame == frame) return;
    n.frame = frame;
    n.next_blank = kNegInf;
    n.next_label_end = kNegInf;
    touched_.push_back(id);
  }

  int child_of(int parent, int label) {
    const int64_t key = child_key(parent, label);
    auto it = children_.find(key);
    if (it != children_.end()) return it->second;
    Node n;
    n.parent = parent;
    n.label = label;
    n.lm_state = nodes_[parent].lm_state;
    n.lm = nodes_[parent].lm;
    if (lm_ && label == opt_.space_label) n.lm += complete_word(parent, &n.lm_state);
    const int id = static_cast<int>(nodes_.size());
    nodes_.push_back(n);
    children_.emplace(key, id);
    return id;
  }

  // The fused LM term of the word that ends at node `last` (the labels back to the previous
  // space or the start), given and advancing the LM context *state. 0 for an empty word.
  double complete_word(int last, ArpaLm::State* state) const {
    word_.clear();
    for (int n = last; n != 0 && nodes_[n].label != opt_.space_label; n = nodes_[n].parent)
      word_.push_back(nodes_[n].label);
    if (word_.empty()) return 0;
    std::string text;
    for (auto it = word_.rbegin(); it != word_.rend(); ++it) text += symbols_[*it];
    double log10_prob;
    if (opt_.unk_log10_prob < 0 && !lm_->has_word(text)) {
      log10_prob = opt_.unk_log10_prob;
      *state = lm_->null_state();
    } else {
      const ArpaLm::Scored r = lm_->score(*state, lm_->word_id(text));
      log10_prob = r.log10_prob;
      *state = r.next;
    }
    const double lm_term = opt_.lm_weight == 0 ? 0 : opt_.lm_weight * kLn10 * log10_prob;
    return lm_term + opt_.word_score;
  }

  const BeamSearchOptions& opt_;
  const ArpaLm* lm_;
  const std::vector<std::string>& symbols_;
  const int num_classes_;
  std::vector<Node> nodes_;
  std::unordered_map<int64_t, int> children_;
  std::vector<int> beam_, touched_, labels_;
  std::vector<double> logp_;
  mutable std::vector<int> word_;
  static constexpr size_t kMinCompaction = size_t{1} << 16;
  size_t next_compaction_ = kMinCompaction;
};

}  // namespace

PrefixBeamSearch::PrefixBeamSearch(const BeamSearchOptions& options,
                                   std::shared_ptr<const ArpaLm> lm,
                                   std::vector<std::string> symbols)
    : options_(options), lm_(std::move(lm)), symbols_(std::move(symbols)) {
  DS2_CHECK(options_.beam_width >= 1,
            "beam search: beam_width must be >= 1, got " << options_.beam_width);
  DS2_CHECK(options_.top_k >= 0, "beam search: top_k must be >= 0, got " << options_.top_k);
  DS2_CHECK(!std::isnan(options_.prune_log_prob), "beam search: prune_log_prob is NaN");
  DS2_CHECK(std::isfinite(options_.lm_weight) && std::isfinite(options_.word_score),
            "beam search: lm_weight and word_score must be finite");
  DS2_CHECK(options_.unk_log10_prob <= 0,
            "beam search: unk_log10_prob must be <= 0, got " << options_.unk_log10_prob);
  if (lm_) {
    DS2_CHECK(options_.space_label >= 1 && options_.space_label < static_cast<int>(symbols_.size()),
              "beam search: with a language model, space_label must name one of the "
                  << symbols_.size() << " classes, got " << options_.space_label);
    DS2_CHECK(lm_->unk_id() != ArpaLm::kNoWord || options_.unk_log10_prob < 0,
              "beam search: the language model has no <unk>; set unk_log10_prob (< 0) to score "
              "words outside its vocabulary");
  }
}

std::vector<BeamHypothesis> PrefixBeamSearch::decode(const float* logits, int max_frames, int batch,
                                                     int num_classes, int utterance,
                                                     int length) const {
  DS2_CHECK(logits != nullptr || length == 0, "beam search: logits are null");
  DS2_CHECK(num_classes >= 1, "beam search: num_classes must be >= 1, got " << num_classes);
  DS2_CHECK(utterance >= 0 && utterance < batch,
            "beam search: utterance " << utterance << " outside a batch of " << batch);
  DS2_CHECK(length >= 0 && length <= max_frames, "beam search: utterance "
                                                     << utterance << " has length " << length
                                                     << " outside [0, " << max_frames << "]");
  DS2_CHECK(!lm_ || static_cast<int>(symbols_.size()) == num_classes,
            "beam search: " << symbols_.size() << " symbols for " << num_classes << " classes");
  Search search(options_, lm_.get(), symbols_, num_classes);
  for (int t = 0; t < length; ++t)
    search.step(logits + (static_cast<int64_t>(t) * batch + utterance) * num_classes, t);
  return search.finish();
}

}  // namespace ds2
