// `ds2 score` against the real NIST sclite (Debian package sctk): the same S, D, I and N for
// every utterance and in total, on trn files full of substitutions, deletions, insertions, empty
// hypotheses and references, case differences and alignment ties.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

using testing::run_command;
using testing::shell_quote;

struct Counts {
  long c = 0, s = 0, d = 0, i = 0;
  bool operator==(const Counts& o) const { return c == o.c && s == o.s && d == o.d && i == o.i; }
};
std::ostream& operator<<(std::ostream& out, const Counts& x) {
  return out << "C=" << x.c << " S=" << x.s << " D=" << x.d << " I=" << x.i;
}

// sclite on PATH, or where Debian's sctk package puts it.
std::string find_sclite() {
  if (run_command("command -v sclite").code == 0) return "sclite";
  if (run_command("test -x /usr/lib/sctk/bin/sclite").code == 0) return "/usr/lib/sctk/bin/sclite";
  return "";
}

// Reference and hypothesis trn files for `count` utterances over a six-word vocabulary (small,
// so alignments tie often), deterministic for a seed.
void write_trn_pair(const std::string& ref_path, const std::string& hyp_path, int count) {
  const std::vector<std::string> vocab = {"one", "two", "three", "four", "five", "six"};
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> word(0, static_cast<int>(vocab.size()) - 1);
  std::uniform_int_distribution<int> length(0, 10);
  std::ofstream ref(ref_path), hyp(hyp_path);
  for (int n = 0; n < count; ++n) {
    char id[32];
    std::snprintf(id, sizeof id, "spk%d-%04d", n % 5, n);
    std::vector<std::string> r, h;
    const int len = n % 17 == 0 ? 0 : length(rng);  // some empty references
    for (int k = 0; k < len; ++k) r.push_back(vocab[word(rng)]);
    if (n % 9 != 4) {  // every ninth hypothesis empty
      if (u(rng) < 0.1) h.push_back(vocab[word(rng)]);
      for (const std::string& w : r) {
        const double x = u(rng);
        if (x < 0.6) {
          h.push_back(w);
        } else if (x < 0.75) {
          h.push_back(vocab[word(rng)]);  // substitution (or, by chance, the same word)
        } else if (x < 0.87) {
          // deletion
        } else {
          h.push_back(w);
          h.push_back(vocab[word(rng)]);  // insertion
        }
      }
      for (std::string& w : h)
        if (u(rng) < 0.05) w[0] = static_cast<char>(w[0] - 'a' + 'A');  // case differs
    }
    auto line = [&](const std::vector<std::string>& words) {
      std::string out;
      for (const auto& w : words) out += w + " ";
      return out + "(" + id + ")\n";
    };
    ref << line(r);
    hyp << line(h);
  }
}

// Per-utterance counts from sclite's "pra" report ("id: (x)" then "Scores: (#C #S #D #I) c s d
// i"), or from `ds2 score --per-utterance` ("utt x C=c S=s D=d I=i N=n").
std::map<std::string, Counts> parse_sclite_pra(const std::string& text) {
  std::map<std::string, Counts> out;
  std::istringstream in(text);
  std::string line, id;
  std::smatch m;
  const std::regex id_re(R"(^id: \((.*)\)\s*$)");
  const std::regex scores_re(R"(^Scores: \(#C #S #D #I\) (\d+) (\d+) (\d+) (\d+))");
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, id_re)) id = m[1];
    if (std::regex_search(line, m, scores_re))
      out[id] = {std::stol(m[1]), std::stol(m[2]), std::stol(m[3]), std::stol(m[4])};
  }
  return out;
}

std::map<std::string, Counts> parse_ds2_utterances(const std::string& text) {
  std::map<std::string, Counts> out;
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  const std::regex re(R"(^utt (\S+) C=(\d+) S=(\d+) D=(\d+) I=(\d+) N=\d+$)");
  while (std::getline(in, line))
    if (std::regex_search(line, m, re))
      out[m[1]] = {std::stol(m[2]), std::stol(m[3]), std::stol(m[4]), std::stol(m[5])};
  return out;
}

TEST(ScoreAgainstSclite, SameCountsPerUtteranceAndInTotal) {
  const std::string sclite = find_sclite();
  if (sclite.empty())
    GTEST_SKIP() << "sclite is not installed (Debian package sctk; scripts/install-deps.sh "
                    "installs it): ds2 score not compared with it";
  TempDir dir;
  const std::string ref = dir.file("ref.trn"), hyp = dir.file("hyp.trn");
  write_trn_pair(ref, hyp, 400);

  const auto ours = run_command(std::string(DS2_BINARY) + " score " + shell_quote(ref) + " " +
                                shell_quote(hyp) + " --per-utterance");
  ASSERT_EQ(ours.code, 0) << ours.output;
  const std::string sclite_args =
      " -r " + shell_quote(ref) + " trn -h " + shell_quote(hyp) + " trn -i rm -o ";
  const auto pra = run_command(sclite + sclite_args + "pra stdout");
  ASSERT_EQ(pra.code, 0) << pra.output;
  const auto rsum = run_command(sclite + sclite_args + "rsum stdout");
  ASSERT_EQ(rsum.code, 0) << rsum.output;

  // Every utterance.
  const std::map<std::string, Counts> theirs = parse_sclite_pra(pra.output);
  const std::map<std::string, Counts> mine = parse_ds2_utterances(ours.output);
  ASSERT_EQ(theirs.size(), 400u) << pra.output.substr(0, 2000);
  ASSERT_EQ(mine.size(), 400u) << ours.output.substr(0, 2000);
  Counts total;
  int with_errors = 0;
  for (const auto& [id, c] : theirs) {
    ASSERT_TRUE(mine.count(id)) << id;
    EXPECT_EQ(mine.at(id), c) << id;
    total.c += c.c;
    total.s += c.s;
    total.d += c.d;
    total.i += c.i;
    with_errors += c.s + c.d + c.i > 0;
  }
  // The test data exercises every kind of edit.
  EXPECT_GT(total.s, 100);
  EXPECT_GT(total.d, 100);
  EXPECT_GT(total.i, 100);

  // sclite's raw summary: "| Sum | #Snt #Wrd | Corr Sub Del Ins Err S.Err |".
  std::smatch m;
  const std::regex sum_re(
      R"(\|\s*Sum\s*\|\s*(\d+)\s+(\d+)\s*\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|)");
  ASSERT_TRUE(std::regex_search(rsum.output, m, sum_re)) << rsum.output;
  const long sentences = std::stol(m[1]), n = std::stol(m[2]);
  const Counts sum{std::stol(m[3]), std::stol(m[4]), std::stol(m[5]), std::stol(m[6])};
  const long errors = std::stol(m[7]), sentence_errors = std::stol(m[8]);
  EXPECT_EQ(sentences, 400);
  EXPECT_EQ(sum, total);
  EXPECT_EQ(n, sum.c + sum.s + sum.d);
  EXPECT_EQ(errors, sum.s + sum.d + sum.i);
  EXPECT_EQ(sentence_errors, with_errors);
  std::cout << "sclite: " << sentences << " utterances, N=" << n << " " << sum << ", "
            << sentence_errors << " with errors\n";

  // ds2's totals and WER.
  char wer[160];
  std::snprintf(wer, sizeof wer, "\nWER %.2f%% (S=%ld D=%ld I=%ld N=%ld)\n", 100.0 * errors / n,
                sum.s, sum.d, sum.i, n);
  EXPECT_NE(ours.output.find(wer), std::string::npos) << wer << ours.output.substr(0, 200);
  EXPECT_NE(ours.output.find("utterances 400 (with word errors " + std::to_string(sentence_errors) +
                             ")\n"),
            std::string::npos);
}

TEST(ScoreCommand, ErrorsNameTheFileAndLine) {
  TempDir dir;
  const std::string ref = dir.file("r.trn"), hyp = dir.file("h.trn");
  std::ofstream(ref) << "a b (u-1)\nc (u-2)\n";
  std::ofstream(hyp) << "a b (u-1)\n";
  auto r = run_command(std::string(DS2_BINARY) + " score " + ref + " " + hyp);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output,
            "ds2: error: " + ref + ":2: utterance 'u-2' has no hypothesis in " + hyp + "\n");
  std::ofstream(hyp) << "a b (u-1)\nc\n";
  r = run_command(std::string(DS2_BINARY) + " score " + ref + " " + hyp);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "ds2: error: " + hyp + ":2: a trn line must end in \"(utterance-id)\"\n");
  std::ofstream(hyp) << "A x (u-1)\nc (u-2)\n";
  r = run_command(std::string(DS2_BINARY) + " score " + ref + " " + hyp);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output,
            "utterances 2 (with word errors 1)\n"
            "WER 33.33% (S=1 D=0 I=0 N=3)\n"
            "CER 25.00% (S=1 D=0 I=0 N=4)\n");
}

}  // namespace
}  // namespace ds2
