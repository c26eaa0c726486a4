// The ds2 subcommands, each a function of parsed arguments returning an exit code. Library
// errors arrive as ds2::Error and are printed by main() as one line.
#pragma once

#include <string>
#include <vector>

namespace ds2::cli {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
};
int train(const TrainArgs& args);

struct EvalArgs {
  std::string checkpoint;
  std::string manifest;
  int batch_size = 16;
  int threads = 2;
  int show_worst = 5;
  std::string trn_prefix;  // write PREFIX.ref.trn / PREFIX.hyp.trn for sclite
};
int eval(const EvalArgs& args);

struct TranscribeArgs {
  std::string checkpoint;
  std::vector<std::string> audio;
  int batch_size = 8;
  int threads = 2;
};
int transcribe(const TranscribeArgs& args);

struct ValidateArgs {
  std::string config;
  std::vector<std::string> overrides;
};
int validate_data(const ValidateArgs& args);

struct ImportKaldiArgs {
  std::string dir;
  std::string manifest;
};
int import_kaldi(const ImportKaldiArgs& args);

}  // namespace ds2::cli
