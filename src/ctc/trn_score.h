// Scoring of sclite "trn" transcript files, the way `sclite -r REF trn -h HYP trn -i rm` scores
// them: each line is "words (utterance-id)", utterances are matched by id, words are compared
// case-insensitively (sclite's default; ASCII letters are folded to lower case) and aligned with
// sclite's weights and tie-breaking (ctc/error_rate.h), and the corpus totals are the sums of the
// per-utterance counts. tests/cli/score_test.cpp checks S, D, I and N against the real sclite.
//
//   std::vector<ds2::TrnUtterance> ref = ds2::read_trn("test.ref.trn");
//   std::vector<ds2::TrnUtterance> hyp = ds2::read_trn("test.hyp.trn");
//   ds2::TrnScore score = ds2::score_trn(ref, hyp);
//   printf("WER %.2f%%\n", 100 * score.words.rate());
//
// Unlike sclite, which silently leaves out reference utterances that have no hypothesis, a
// reference without a hypothesis (or a hypothesis without a reference, or an id given twice) is
// an error naming the file, line and id. sclite's special tokens (optionally deletable words in
// parentheses, alternations in braces) are not interpreted: every token is a plain word.
#pragma once

#include <string>
#include <vector>

#include "ctc/error_rate.h"

namespace ds2 {

struct TrnUtterance {
  std::string id;    // text between the parentheses at the end of the line
  std::string text;  // everything before them, as written
  std::string file;  // for messages
  int line = 0;      // 1-based
};

// Parses trn text; `file` names it in errors ("FILE:LINE: ..."). Lines holding only whitespace
// are skipped; any other line must end in "(id)" with a non-empty id.
std::vector<TrnUtterance> parse_trn(const std::string& content, const std::string& file);
std::vector<TrnUtterance> read_trn(const std::string& path);

struct TrnUtteranceScore {
  std::string id;
  ErrorCounts words;
  ErrorCounts chars;
};

struct TrnScore {
  ErrorCounts words;
  ErrorCounts chars;  // ds2's character errors (error_rate.h), not sclite's -c mode
  std::vector<TrnUtteranceScore> utterances;  // in reference order
  // Utterances with at least one word error (sclite's "S.Err" count).
  int64_t utterances_with_errors = 0;
};

// Scores `hyp` against `ref`; both must hold the same set of ids, each once.
TrnScore score_trn(const std::vector<TrnUtterance>& ref, const std::vector<TrnUtterance>& hyp);

}  // namespace ds2
