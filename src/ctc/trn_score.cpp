#include "ctc/trn_score.h"

#include <algorithm>
#include <unordered_map>

#include "core/atomic_file.h"
#include "core/error.h"

namespace ds2 {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

std::string lower_ascii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string where(const TrnUtterance& u) {
  return u.file + ":" + std::to_string(u.line);
}

// Index of every id, rejecting duplicates.
std::unordered_map<std::string, size_t> index_ids(const std::vector<TrnUtterance>& utts) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < utts.size(); ++i) {
    auto [it, inserted] = index.emplace(utts[i].id, i);
    DS2_CHECK(inserted, where(utts[i])
                            << ": utterance id '" << utts[i].id << "' appears again (first at line "
                            << utts[it->second].line << ")");
  }
  return index;
}

}  // namespace

std::vector<TrnUtterance> parse_trn(const std::string& content, const std::string& file) {
  std::vector<TrnUtterance> out;
  size_t begin = 0;
  int line_no = 0;
  while (begin < content.size()) {
    size_t end = content.find('\n', begin);
    if (end == std::string::npos) end = content.size();
    ++line_no;
    std::string line = content.substr(begin, end - begin);
    begin = end + 1;
    while (!line.empty() && is_space(line.back())) line.pop_back();
    if (std::all_of(line.begin(), line.end(), is_space)) continue;
    const size_t open = line.rfind('(');
    DS2_CHECK(line.back() == ')' && open != std::string::npos,
              file << ":" << line_no << ": a trn line must end in \"(utterance-id)\"");
    TrnUtterance u;
    u.id = line.substr(open + 1, line.size() - open - 2);
    DS2_CHECK(!u.id.empty(), file << ":" << line_no << ": empty utterance id \"()\"");
    u.text = line.substr(0, open);
    u.file = file;
    u.line = line_no;
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<TrnUtterance> read_trn(const std::string& path) {
  return parse_trn(read_file(path), path);
}

TrnScore score_trn(const std::vector<TrnUtterance>& ref, const std::vector<TrnUtterance>& hyp) {
  const auto ref_index = index_ids(ref);
  const auto hyp_index = index_ids(hyp);
  for (const auto& h : hyp)
    DS2_CHECK(ref_index.count(h.id), where(h) << ": utterance '" << h.id << "' has no reference"
                                              << (ref.empty() ? "" : " in " + ref.front().file));
  TrnScore score;
  for (const auto& r : ref) {
    auto it = hyp_index.find(r.id);
    DS2_CHECK(it != hyp_index.end(), where(r) << ": utterance '" << r.id << "' has no hypothesis"
                                              << (hyp.empty() ? "" : " in " + hyp.front().file));
    const std::string ref_text = lower_ascii(r.text);
    const std::string hyp_text = lower_ascii(hyp[it->second].text);
    TrnUtteranceScore u{r.id, word_errors(ref_text, hyp_text), char_errors(ref_text, hyp_text)};
    score.words.add(u.words);
    score.chars.add(u.chars);
    if (u.words.errors() > 0) ++score.utterances_with_errors;
    score.utterances.push_back(std::move(u));
  }
  return score;
}

}  // namespace ds2
